"""Capture llama.cpp's SentencePiece tokenization and detokenization on the `llama`-vocabulary files.

Usage: capture_spm.py OUT_JSON GGUF...

llama.cpp through llama-cpp-python 0.3.36, vocabulary only. For each file whose
vocabulary type is SPM (`tokenizer.ggml.model = "llama"`; other files are skipped and
listed), records its sha256, its `tokenizer.ggml.add_space_prefix` key (absent: true), the ids
`llama_vocab_is_eog` holds, and for each text of
TEXTS:

- `ids`: `llama_tokenize(text, add_special=True, parse_special=True)` (bos as the file
  says; special and user-defined tokens written in the text become their ids);
- `ids_without_special`: the same with `add_special=False` (what llama.cpp's server's
  `/tokenize` returns unless asked for `add_special`);
- `decoded`: `llama_detokenize(ids, remove_special=False, unparse_special=True)`;
- `decoded_without_bos`: the same of `ids` without a leading bos (the text round trip);
- `pieces`: hex of `llama_token_to_piece(id, lstrip=0, special=True)` for each id.

And for each generation case of the file's `<family>-llamacpp.json` (next to it): the
prompt's `ids` as above and `continuation`, the greedy ids' pieces concatenated (what
llama.cpp's server streams), as text.
"""
import ctypes
import hashlib
import json
import os
import sys

import llama_cpp

TEXTS = [
    "Hello, world! How are you today?",
    "The quick brown fox jumps over the lazy dog. 1234567 3.14159",
    "Grüße aus München – ça va? Ñandú, señor. Ærøskøbing, Ångström, naïve café",
    "Привет, мир! Как дела? Съешь же ещё этих мягких французских булок.",
    "你好，世界！我想在apple工作1314151天",
    "こんにちは世界。カタカナとひらがな",
    "안녕하세요 세계",
    "مرحبا بالعالم، كيف حالك؟",
    "नमस्ते दुनिया",
    "🚀 emojis 😶\u200d🌫️ ✅ 🦙🦙 👨‍👩‍👧‍👦",
    "Rare characters fall back to bytes: 𠀋𪚥龘 ꙮ 𓂀 ﷽",
    "  leading spaces,\ttabs\tand\nnew lines\n\n  and trailing   ",
    "a  b   c    d     e\t\tf\n\n\ng \u3000h",
    "I've been 'told he's there, 'RE you sure? We'Ve a'lL",
    "def f(x):\n    return x ** 2  # square\n",
    "0 00 000 0000 1.5e-10 -42 +7 1,000,000 3/4 ½ ²",
    "aaaaaaaaa bbbbbbbb ========== ------- !!!!!!!! ........ 1111111 ababababab ))))))",
    " ",
    "   ",
    "\n",
    "",
    "▁ already has the marker ▁▁ and <0x41> as text",
    "<s>Hello</s> world",
    "<s> <s>  </s>x</s>",
    "<unk> unknown <unk>",
    "<start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\n",
    "<|user|>\nWhat is 2+2?<|end|>\n<|assistant|>\nIt is 4.<|end|>",
    "<|system|> You are helpful.<|end|><|endoftext|>",
    "[PAD32011] user-defined [PAD32012]x",
]


def tokenize(vocab, text, add_special=True):
    data = text.encode()
    n_max = len(data) + 8
    buf = (llama_cpp.llama_token * n_max)()
    n = llama_cpp.llama_tokenize(vocab, data, len(data), buf, n_max, add_special, True)
    if n < 0:
        sys.exit(f"capture_spm: llama_tokenize needs {-n} tokens for {text!r}")
    return list(buf[:n])


def detokenize(vocab, ids):
    arr = (llama_cpp.llama_token * max(len(ids), 1))(*ids)
    size = 64 + 64 * len(ids)
    out = ctypes.create_string_buffer(size)
    n = llama_cpp.llama_detokenize(vocab, arr, len(ids), out, size, False, True)
    if n < 0:
        sys.exit("capture_spm: llama_detokenize buffer too small")
    return out.raw[:n].decode("utf-8", errors="replace")


def piece(vocab, tid):
    out = ctypes.create_string_buffer(256)
    n = llama_cpp.llama_token_to_piece(vocab, tid, out, 256, 0, True)
    if n < 0:
        sys.exit(f"capture_spm: piece of {tid} longer than 256 bytes")
    return out.raw[:n]


dest, paths = sys.argv[1], sys.argv[2:]
files, skipped = [], []
for path in paths:
    llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    name = os.path.basename(path)
    if llama_cpp.llama_vocab_type(vocab) != llama_cpp.LLAMA_VOCAB_TYPE_SPM:
        skipped.append(name)
        continue
    bos = llama_cpp.llama_vocab_bos(vocab)
    texts = []
    for text in TEXTS:
        ids = tokenize(vocab, text)
        no_bos = ids[1:] if ids[:1] == [bos] else ids
        texts.append({
            "text": text,
            "ids": ids,
            "ids_without_special": tokenize(vocab, text, add_special=False),
            "decoded": detokenize(vocab, ids),
            "decoded_without_bos": detokenize(vocab, no_bos),
            "pieces": [piece(vocab, t).hex() for t in ids],
        })
    generate = []
    ref_path = path[: -len(".gguf")] + "-llamacpp.json"
    if os.path.exists(ref_path):
        with open(ref_path) as f:
            ref = json.load(f)
        for case in ref["generate"]:
            cont = b"".join(piece(vocab, t) for t in case["greedy_ids"])
            generate.append({
                "prompt": case["prompt"],
                "ids": tokenize(vocab, case["prompt"]),
                "greedy_ids": case["greedy_ids"],
                "continuation": cont.decode("utf-8", errors="replace"),
            })
    files.append({
        "model": name,
        "model_sha256": hashlib.sha256(open(path, "rb").read()).hexdigest(),
        "add_bos": bool(llama_cpp.llama_vocab_get_add_bos(vocab)),
        # The file's key as llama.cpp's loader reads it (absent: llama.cpp's SPM default, true).
        "add_space_prefix_key": {"true": True, "false": False, None: None}[
            llm.metadata.get("tokenizer.ggml.add_space_prefix")],
        "bos": bos,
        # llama_vocab_is_eog over the whole vocabulary.
        "eog_ids": [t for t in range(llama_cpp.llama_vocab_n_tokens(vocab))
                    if llama_cpp.llama_vocab_is_eog(vocab, t)],
        "texts": texts,
        "generate": generate,
    })
    del llm
out = {
    "reference": "llama.cpp via llama-cpp-python 0.3.36 (vocab_only): llama_tokenize(add_special=True, "
                 "parse_special=True), llama_detokenize(remove_special=False, unparse_special=True), "
                 "llama_token_to_piece(lstrip=0, special=True); made by scripts/capture-spm-tokens",
    "skipped_not_spm": skipped,
    "files": files,
}
with open(dest, "w") as f:
    json.dump(out, f, indent=1, ensure_ascii=False)
    f.write("\n")
print(f"capture_spm: wrote {dest}: {len(files)} SentencePiece files, skipped {skipped}")
