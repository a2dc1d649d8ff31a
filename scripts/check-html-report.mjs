// Loads battery HTML reports in headless Chromium and checks that the
// mutation-testing-elements component rendered every mutation of the embedded report.
// Run by scripts/check-html-report, which installs what it needs. Arguments: the
// puppeteer-core install folder, the screenshot path ('' for none), then the pages.
// Prints one line per page; exit 0 when every page passed, 1 otherwise.
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import path from 'node:path';
import fs from 'node:fs';

const [installDir, screenshot, ...pages] = process.argv.slice(2);
const puppeteer = createRequire(path.join(path.resolve(installDir), 'noop.js'))('puppeteer-core');

// Every data-mutant-id in the document, looking inside every open shadow root.
function renderedIds() {
  const ids = new Set();
  const walk = (root) => {
    for (const el of root.querySelectorAll('*')) {
      const id = el.getAttribute('data-mutant-id');
      if (id !== null) ids.add(id);
      if (el.shadowRoot) walk(el.shadowRoot);
    }
  };
  walk(document);
  return [...ids];
}

// The hrefs of the component's file links (`#mutant/<file>`), from the overview.
function fileRoutes() {
  const routes = new Set();
  const walk = (root) => {
    for (const el of root.querySelectorAll('a[href]')) {
      const hash = new URL(el.href).hash;
      if (/^#mutant\/.+/.test(hash)) routes.add(hash);
    }
    for (const el of root.querySelectorAll('*')) if (el.shadowRoot) walk(el.shadowRoot);
  };
  walk(document);
  return [...routes];
}

const settle = () => new Promise((r) => setTimeout(r, 500));
const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu'],
});
let failed = 0;
for (const [n, file] of pages.entries()) {
  const problems = [];
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 900 });
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console error: ${m.text()}`); });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('request', (r) => {
    const scheme = new URL(r.url()).protocol;
    if (scheme !== 'file:' && scheme !== 'data:') problems.push(`network request: ${r.url()}`);
  });
  const url = pathToFileURL(path.resolve(file)).href;
  await page.goto(url, { waitUntil: 'load' });
  await settle();
  const embedded = await page.evaluate(() => {
    const block = document.getElementById('battery-report');
    if (!block) return null;
    const doc = JSON.parse(block.textContent);
    return Object.values(doc.files).flatMap((f) => f.mutants.map((m) => m.id));
  });
  // The ids to find: the mutations of the battery.json written beside the page (the
  // harness's own record, so a page that lost a mutation fails), else the embedded ones.
  const beside = path.join(path.dirname(path.resolve(file)), 'battery.json');
  let expected = embedded;
  if (embedded !== null && fs.existsSync(beside)) {
    expected = JSON.parse(fs.readFileSync(beside, 'utf8')).mutations.map((m) => m.id);
    const lost = expected.filter((id) => !embedded.includes(id));
    if (lost.length) problems.push(`in battery.json but not in the page's report: ${lost.join(', ')}`);
  }
  if (expected === null) {
    problems.push('no embedded report (the battery did not complete)');
  } else {
    const seen = new Set();
    const routes = await page.evaluate(fileRoutes);
    for (const route of routes) {
      await page.goto(url + route, { waitUntil: 'load' });
      await settle();
      for (const id of await page.evaluate(renderedIds)) seen.add(id);
    }
    const missing = expected.filter((id) => !seen.has(id));
    if (missing.length) problems.push(`not rendered: ${missing.join(', ')}`);
    console.log(`${file}: ${expected.length} mutations in the report, ${expected.length - missing.length} rendered, ${routes.length} file views`);
    if (screenshot && n === 0) {
      // The file view with the most mutants.
      const counts = await page.evaluate(() => Object.fromEntries(
        Object.entries(JSON.parse(document.getElementById('battery-report').textContent).files)
          .map(([name, f]) => [name, f.mutants.length])));
      // The component names files without their common folder: match on the path's end.
      const weight = (r) => {
        const shown = decodeURIComponent(r.slice('#mutant/'.length));
        return Object.entries(counts)
          .filter(([name]) => name === shown || name.endsWith(`/${shown}`))
          .reduce((sum, [, n]) => sum + n, 0);
      };
      const best = [...routes].sort((a, b) => weight(b) - weight(a))[0] || '';
      await page.goto(url + best, { waitUntil: 'load' });
      await settle();
      await page.screenshot({ path: screenshot, fullPage: false });
      console.log(`screenshot: ${screenshot}`);
    }
  }
  for (const p of problems) console.log(`${file}: ${p}`);
  console.log(`${file}: ${problems.length ? 'FAIL' : 'ok'}`);
  if (problems.length) failed += 1;
  await page.close();
}
await browser.close();
process.exit(failed ? 1 : 0);
