"""Capture llama.cpp's tokenization and greedy logits on one tiny architecture file.

Usage: capture.py FAMILY GGUF OUT_JSON

llama.cpp through llama-cpp-python 0.3.36 (the same llama.cpp whose converter made the
file), 2 threads. Records: the file's sha256; llama.cpp's token ids of each text of
TEXTS (multilingual; `add_bos` as the file says, no special-token parsing); and for each
prompt of PROMPTS, its ids, the greedy continuation (GREEDY tokens, or to the end token)
and the top-8 logits at every step (the prefill of the prompt, then one token per
evaluation).
"""
import hashlib
import json
import sys

import llama_cpp

family, path, dest = sys.argv[1:4]
GREEDY = 24
TEXTS = [
    "Hello, world! How are you today?",
    "The quick brown fox jumps over the lazy dog. 1234567 3.14159",
    "Grüße aus München – ça va? Ñandú, señor.",
    "Привет, мир! Как дела?",
    "你好，世界！我想在apple工作1314151天",
    "こんにちは世界。カタカナとひらがな",
    "안녕하세요 세계",
    "مرحبا بالعالم",
    "नमस्ते दुनिया",
    "🚀 emojis 😶\u200d🌫️ ✅ 🦙🦙",
    "  leading spaces,\ttabs\tand\nnew lines\n\n  and trailing   ",
    "I've been 'told he's there, 'RE you sure? We'Ve a'lL",
    "def f(x):\n    return x ** 2  # square\n",
]
PROMPTS = [
    "The capital of France is Paris, and the capital of Germany is Berlin. The capital of Italy is",
    "Once upon a time, in a small village by the sea, there lived an old fisherman who",
    # Long: past a thousand positions, where Llama 3's frequency factors turn the
    # low-frequency pairs by whole radians.
    " ".join(["Every morning the fisherman rowed out past the lighthouse, counted the gulls,"
              " and sang the same old song about the northern wind."] * 48) + " Then he",
]

sha = hashlib.sha256(open(path, "rb").read()).hexdigest()
llm = llama_cpp.Llama(model_path=path, n_ctx=2048, n_batch=2048, n_ubatch=512, n_threads=2, n_threads_batch=2,
                      logits_all=True, verbose=False)
add_bos = llm._model.add_bos_token() if hasattr(llm._model, "add_bos_token") else True
eos = llm.token_eos()
tokenization = [{"text": t, "ids": llm.tokenize(t.encode(), add_bos=False, special=False)}
                for t in TEXTS]
cases = []
for prompt in PROMPTS:
    ids = llm.tokenize(prompt.encode(), add_bos=True, special=False)
    llm.reset()
    llm.eval(ids)
    greedy, steps = [], []
    for _ in range(GREEDY):
        pos = llm.n_tokens - 1
        row = llm.scores[pos]
        order = sorted(range(len(row)), key=lambda i: (-float(row[i]), i))[:8]
        steps.append({"pos": pos, "top": [[i, float(row[i])] for i in order]})
        tok = order[0]
        greedy.append(tok)
        if tok == eos:
            break
        llm.eval([tok])
    cases.append({"prompt": prompt, "prompt_ids": ids, "greedy_ids": greedy, "steps": steps})
out = {
    "family": family,
    "model": path.rsplit("/", 1)[-1],
    "model_sha256": sha,
    "reference": "llama.cpp via llama-cpp-python 0.3.36, n_threads=2, greedy",
    "tokenization": tokenization,
    "generate": cases,
}
with open(dest, "w") as f:
    json.dump(out, f, indent=1, ensure_ascii=False)
    f.write("\n")
print(f"capture: {family}: wrote {dest} ({sum(len(c['steps']) for c in cases)} steps)")
