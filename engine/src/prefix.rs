//! The shared prefix cache: full KV pages of token prefixes already computed, kept after their sequence ends and reused by later requests that start with the same tokens.
//!
//! A page is found by the hash chain of the tokens it holds: page `i` of a token stream is
//! keyed by `hash(key of page i-1, tokens[i·P .. (i+1)·P])` (`P` positions per page), so a
//! key names the page's tokens *and* everything before them, as the KV rows a page holds
//! depend on every earlier token. This is vLLM's automatic prefix caching keyed by block
//! hashes (docs/design.md §2.6). A request leases the longest run of cached pages its prompt
//! starts with (never its last token: that one must run to give the first new token's
//! logits); leased pages are pinned until the request ends. Unpinned pages are evicted in
//! least-recently-used order, deepest page of a chain first, when admission needs their
//! bytes.
//!
//! Accounting: a cached page's bytes are held by the cache in the scheduler
//! ([`crate::scheduler::Scheduler::hold_cached`]), not by any request; a request is priced
//! for the positions it adds (its reservation leaves out the leased prefix). When a request
//! ends, the pages it filled that the cache keeps move from its reservation to the cache
//! ([`crate::scheduler::Scheduler::complete_keeping`]).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

/// One cached page.
#[derive(Debug, Clone, Copy)]
struct Entry {
    /// Physical page id in the batch's KV cache.
    page: usize,
    /// Position of the page in its chain (0 for the first page of a prompt).
    depth: usize,
    /// Leases that use it now.
    pins: usize,
    /// Tick of its last lease or insertion.
    used: u64,
}

#[derive(Debug, Default)]
struct Index {
    entries: HashMap<u64, Entry>,
    tick: u64,
    /// Pages evicted since the batch last took them (it drops their holds).
    evicted: Vec<usize>,
}

/// The prefix cache of one batch: an index shared by the service's submitting threads
/// (lookups, leases, evictions) and its worker (insertions, the evicted pages' release).
#[derive(Debug, Clone)]
pub struct PrefixCache {
    index: Arc<Mutex<Index>>,
    page_tokens: usize,
    page_bytes: u64,
}

/// The cached pages a request starts with, pinned until the lease is dropped.
#[derive(Debug)]
pub struct PrefixLease {
    cache: PrefixCache,
    keys: Vec<u64>,
    pages: Vec<usize>,
}

impl PrefixLease {
    /// Physical page ids, in order.
    pub fn pages(&self) -> &[usize] {
        &self.pages
    }

    /// Positions the pages hold.
    pub fn positions(&self) -> usize {
        self.pages.len() * self.cache.page_tokens
    }
}

impl Drop for PrefixLease {
    fn drop(&mut self) {
        let mut ix = self.cache.lock();
        for k in &self.keys {
            if let Some(e) = ix.entries.get_mut(k) {
                e.pins = e.pins.saturating_sub(1);
            }
        }
    }
}

/// The chain keys of the full pages of `tokens` (`page_tokens` each), in order.
pub fn chain_keys(tokens: &[u32], page_tokens: usize) -> Vec<u64> {
    let mut prev = 0u64;
    tokens
        .chunks_exact(page_tokens.max(1))
        .map(|chunk| {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            prev.hash(&mut h);
            chunk.hash(&mut h);
            prev = h.finish();
            prev
        })
        .collect()
}

impl PrefixCache {
    /// An empty cache of pages of `page_tokens` positions and `page_bytes` bytes each.
    pub fn new(page_tokens: usize, page_bytes: u64) -> PrefixCache {
        PrefixCache {
            index: Arc::new(Mutex::new(Index::default())),
            page_tokens: page_tokens.max(1),
            page_bytes,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Positions per page.
    pub fn page_tokens(&self) -> usize {
        self.page_tokens
    }

    /// Bytes per page.
    pub fn page_bytes(&self) -> u64 {
        self.page_bytes
    }

    /// Pages cached now.
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Lease the longest run of cached pages `prompt` starts with, leaving its last token
    /// out (it must run to give the next token's logits). The lease pins them.
    pub fn lease(&self, prompt: &[u32]) -> PrefixLease {
        let usable = prompt.len().saturating_sub(1);
        let keys = chain_keys(&prompt[..usable], self.page_tokens);
        let mut ix = self.lock();
        ix.tick += 1;
        let tick = ix.tick;
        let mut got_keys = Vec::new();
        let mut pages = Vec::new();
        for k in keys {
            let Some(e) = ix.entries.get_mut(&k) else {
                break;
            };
            e.pins += 1;
            e.used = tick;
            got_keys.push(k);
            pages.push(e.page);
        }
        PrefixLease {
            cache: self.clone(),
            keys: got_keys,
            pages,
        }
    }

    /// Offer the full pages of a finished sequence: `tokens` are the positions its KV cache
    /// holds, `blocks` its block table. Returns the pages the cache newly keeps (the caller
    /// adds a hold on each); pages whose key is already cached are not kept twice.
    pub fn offer(&self, tokens: &[u32], blocks: &[usize]) -> Vec<usize> {
        let keys = chain_keys(tokens, self.page_tokens);
        let mut ix = self.lock();
        ix.tick += 1;
        let tick = ix.tick;
        let mut kept = Vec::new();
        for (depth, (k, &page)) in keys.iter().zip(blocks).enumerate() {
            match ix.entries.get_mut(k) {
                Some(e) => e.used = tick,
                None => {
                    ix.entries.insert(
                        *k,
                        Entry {
                            page,
                            depth,
                            pins: 0,
                            used: tick,
                        },
                    );
                    kept.push(page);
                }
            }
        }
        kept
    }

    /// Evict the least recently used page no lease pins (the deepest of a chain first).
    /// Returns whether one was evicted; its page waits in [`PrefixCache::take_evicted`].
    pub fn evict_one(&self) -> bool {
        let mut ix = self.lock();
        let victim = ix
            .entries
            .iter()
            .filter(|(_, e)| e.pins == 0)
            .min_by_key(|(_, e)| (e.used, std::cmp::Reverse(e.depth)))
            .map(|(k, e)| (*k, e.page));
        match victim {
            Some((k, page)) => {
                ix.entries.remove(&k);
                ix.evicted.push(page);
                true
            }
            None => false,
        }
    }

    /// Pages evicted since the last call (the batch drops the cache's hold on each).
    pub fn take_evicted(&self) -> Vec<usize> {
        std::mem::take(&mut self.lock().evicted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(n: u32) -> Vec<u32> {
        (0..n).map(|i| 100 + i).collect()
    }

    /// A lease takes the longest cached run, never the prompt's last token, and stops at the
    /// first page whose tokens (or earlier tokens) differ.
    #[test]
    fn a_lease_is_the_longest_cached_run_before_the_last_token() {
        let c = PrefixCache::new(4, 64);
        assert_eq!(c.offer(&tokens(12), &[7, 8, 9]), [7, 8, 9]);
        assert_eq!(c.lease(&tokens(13)).pages(), [7, 8, 9]);
        // 12 tokens: the last must run, so only two whole pages before it.
        assert_eq!(c.lease(&tokens(12)).pages(), [7, 8]);
        let mut other = tokens(13);
        other[5] = 1;
        assert_eq!(
            c.lease(&other).pages(),
            [7],
            "page 1 differs, so page 2 cannot match"
        );
        let mut first = tokens(13);
        first[0] = 1;
        assert!(
            c.lease(&first).pages().is_empty(),
            "an earlier token differs"
        );
        // Offering the same tokens again keeps nothing twice.
        assert!(c.offer(&tokens(12), &[1, 2, 3]).is_empty());
        assert_eq!(c.len(), 3);
    }

    /// Eviction skips pinned pages and takes the least recently used, deepest first.
    #[test]
    fn eviction_takes_unpinned_pages_least_recently_used_deepest_first() {
        let c = PrefixCache::new(2, 8);
        c.offer(&[1, 2, 3, 4], &[10, 11]);
        c.offer(&[5, 6, 7, 8], &[20, 21]);
        let lease = c.lease(&[5, 6, 7, 8, 9]);
        assert_eq!(lease.pages(), [20, 21]);
        assert!(c.evict_one());
        assert!(c.evict_one());
        assert_eq!(
            c.take_evicted(),
            [11, 10],
            "the older chain, its deeper page first"
        );
        assert!(!c.evict_one(), "the leased pages are pinned");
        drop(lease);
        assert!(c.evict_one());
        assert_eq!(c.take_evicted(), [21]);
    }
}
