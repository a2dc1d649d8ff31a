"""Write a tiny, randomly initialised Hugging Face checkpoint of one model family.

Usage: make_hf.py FAMILY OUT_DIR LLAMA_CPP_DIR

The configuration is the family's published one (the model named in FAMILIES) shrunk to
2-4 layers and a 32-wide residual stream; the vocabulary and tokenizer are real: rebuilt
from the vocabulary-only GGUF files llama.cpp ships in its `models/` folder
(ggml-vocab-*.gguf, MIT licence), as tokenizer.json (byte-level BPE) or tokenizer.model
(SentencePiece). Weights are drawn with a fixed seed, wider than the families' own
initialisation (std 0.02) so that the logits are peaked and a greedy token is not a
near-tie; norm weights are drawn around their neutral value so that every norm matters.
"""
import json
import math
import os
import sys

import numpy as np
import torch
import transformers

family, out, llama_cpp = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, os.path.join(llama_cpp, "gguf-py"))
import gguf  # noqa: E402  (llama.cpp's own gguf-py, the converter's version)

LLAMA3_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN2_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# family: (transformers config class, published model, vocab file, config overrides)
SMALL = dict(hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2)
FAMILIES = {
    # meta-llama/Llama-3.2-1B-Instruct: llama3 rope scaling, tied embeddings.
    "llama3": ("LlamaConfig", "llama-bpe", dict(
        SMALL, num_hidden_layers=2, rms_norm_eps=1e-5, rope_theta=500000.0,
        max_position_embeddings=131072, tie_word_embeddings=True,
        rope_scaling=dict(rope_type="llama3", factor=32.0, low_freq_factor=1.0,
                          high_freq_factor=4.0, original_max_position_embeddings=8192),
        bos_token_id=128000, eos_token_id=128009)),
    # Qwen/Qwen2.5-0.5B-Instruct: QKV bias, tied embeddings.
    "qwen2": ("Qwen2Config", "qwen2", dict(
        SMALL, num_hidden_layers=2, rms_norm_eps=1e-6, rope_theta=1000000.0,
        max_position_embeddings=32768, tie_word_embeddings=True, use_sliding_window=False,
        bos_token_id=151643, eos_token_id=151645)),
    # Qwen/Qwen3-0.6B: Q/K RMSNorm, head_dim 128 apart from hidden/heads (here 16 vs 8).
    "qwen3": ("Qwen3Config", "qwen2", dict(
        SMALL, num_hidden_layers=2, head_dim=16, rms_norm_eps=1e-6, rope_theta=1000000.0,
        max_position_embeddings=40960, tie_word_embeddings=True, use_sliding_window=False,
        bos_token_id=151643, eos_token_id=151645)),
    # google/gemma-2-2b-it: GeGLU, post norms, soft-capping, alternate sliding window.
    # Vocabulary: llama.cpp ships no Gemma 2/3 vocabulary file; the SentencePiece one of
    # LLaMA stands in (the model's arithmetic does not depend on which vocabulary it is).
    "gemma2": ("Gemma2Config", "llama-spm", dict(
        SMALL, num_hidden_layers=4, head_dim=16, rms_norm_eps=1e-6, rope_theta=10000.0,
        max_position_embeddings=8192, attn_logit_softcapping=50.0,
        final_logit_softcapping=30.0, sliding_window=8, query_pre_attn_scalar=16,
        hidden_activation="gelu_pytorch_tanh", bos_token_id=1, eos_token_id=2, pad_token_id=0)),
    # google/gemma-3-1b-it: Q/K norm, 5 local : 1 global layers, local rope base 10000.
    "gemma3": ("Gemma3TextConfig", "llama-spm", dict(
        SMALL, num_hidden_layers=7, head_dim=16, rms_norm_eps=1e-6, rope_theta=1000000.0,
        rope_local_base_freq=10000.0, max_position_embeddings=32768, sliding_window=8,
        sliding_window_pattern=6, query_pre_attn_scalar=16,
        hidden_activation="gelu_pytorch_tanh", bos_token_id=1, eos_token_id=2, pad_token_id=0)),
    # microsoft/Phi-3-mini-4k-instruct: fused qkv_proj and gate_up_proj.
    "phi3": ("Phi3Config", "phi-3", dict(
        SMALL, num_hidden_layers=2, rms_norm_eps=1e-5, rope_theta=10000.0,
        max_position_embeddings=4096, original_max_position_embeddings=4096,
        tie_word_embeddings=False, sliding_window=2047, bos_token_id=1, eos_token_id=32000,
        pad_token_id=32000)),
    # mistralai/Mistral-7B-Instruct-v0.2: Llama layout, SentencePiece vocabulary, rope
    # theta 1e6 (the converter writes it as `llama`).
    "mistral": ("MistralConfig", "llama-spm", dict(
        SMALL, num_hidden_layers=2, rms_norm_eps=1e-5, rope_theta=1000000.0,
        max_position_embeddings=32768, sliding_window=None, tie_word_embeddings=False,
        bos_token_id=1, eos_token_id=2)),
}

cls_name, vocab_name, overrides = FAMILIES[family]
reader = gguf.GGUFReader(os.path.join(llama_cpp, "models", f"ggml-vocab-{vocab_name}.gguf"))


def field(key):
    f = reader.fields.get(key)
    if f is None:
        return None
    if f.types[0] == gguf.GGUFValueType.ARRAY:
        if f.types[-1] == gguf.GGUFValueType.STRING:
            return [bytes(f.parts[i]).decode("utf-8") for i in f.data]
        return [f.parts[i][0].item() for i in f.data]
    if f.types[0] == gguf.GGUFValueType.STRING:
        return bytes(f.parts[-1]).decode("utf-8")
    return f.parts[-1][0].item()


tokens = field("tokenizer.ggml.tokens")
types = field("tokenizer.ggml.token_type")
os.makedirs(out, exist_ok=True)

if field("tokenizer.ggml.model") == "gpt2":
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
    from tokenizers import AddedToken
    merges = [tuple(m.split(" ", 1)) for m in field("tokenizer.ggml.merges")]
    vocab = {t: i for i, t in enumerate(tokens) if types[i] in (1, 6)}
    regex = LLAMA3_REGEX if vocab_name == "llama-bpe" else QWEN2_REGEX
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=vocab_name == "llama-bpe"))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    specials = [AddedToken(t, special=True, normalized=False) for i, t in enumerate(tokens) if types[i] == 3]
    tok.add_special_tokens(specials)
    bos = field("tokenizer.ggml.bos_token_id")
    if vocab_name == "llama-bpe":
        tok.post_processor = processors.TemplateProcessing(
            single=f"{tokens[bos]} $A", pair=f"{tokens[bos]} $A {tokens[bos]} $B",
            special_tokens=[(tokens[bos], bos)])
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.save(os.path.join(out, "tokenizer.json"))
    eos = overrides["eos_token_id"]
    json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": tokens[bos],
               "eos_token": tokens[eos], "model_max_length": 131072,
               "add_bos_token": vocab_name == "llama-bpe"},
              open(os.path.join(out, "tokenizer_config.json"), "w"))
else:
    from sentencepiece import sentencepiece_model_pb2 as sp
    scores = field("tokenizer.ggml.scores")
    m = sp.ModelProto()
    for t, s, ty in zip(tokens, scores, types):
        p = m.pieces.add()
        p.piece, p.score, p.type = t, s, ty
    m.trainer_spec.model_type = sp.TrainerSpec.BPE
    m.trainer_spec.vocab_size = len(tokens)
    m.trainer_spec.byte_fallback = True
    m.trainer_spec.unk_id, m.trainer_spec.bos_id, m.trainer_spec.eos_id, m.trainer_spec.pad_id = 0, 1, 2, -1
    m.normalizer_spec.name = "identity"
    m.normalizer_spec.add_dummy_prefix = True
    m.normalizer_spec.remove_extra_whitespaces = False
    m.normalizer_spec.escape_whitespaces = True
    open(os.path.join(out, "tokenizer.model"), "wb").write(m.SerializeToString())
    # Phi-3's vocabulary is LLaMA's 32000 pieces plus its chat tokens (USER_DEFINED or
    # CONTROL in the GGUF): the converter reads those from added_tokens.json.
    base = 32000
    if len(tokens) > base:
        added = {t: i for i, t in enumerate(tokens) if i >= base}
        m2 = sp.ModelProto()
        m2.CopyFrom(m)
        del m2.pieces[base:]
        m2.trainer_spec.vocab_size = base
        open(os.path.join(out, "tokenizer.model"), "wb").write(m2.SerializeToString())
        json.dump(added, open(os.path.join(out, "added_tokens.json"), "w"))
        json.dump({"tokenizer_class": "LlamaTokenizer",
                   "added_tokens_decoder": {str(i): {"content": t, "special": types[i] == 3}
                                            for t, i in added.items()}},
                  open(os.path.join(out, "tokenizer_config.json"), "w"))

cfg = getattr(transformers, cls_name)(vocab_size=len(tokens), **overrides)
torch.manual_seed(57)
model = transformers.AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.float32)
with torch.no_grad():
    for name, p in model.named_parameters():
        if name.endswith("norm.weight"):
            # Gemma's norms multiply by (1 + w): neutral at 0; the others at 1.
            neutral = 0.0 if family.startswith("gemma") else 1.0
            p.copy_(neutral + 0.2 * torch.randn_like(p))
        elif name.endswith("bias"):
            p.copy_(0.5 * torch.randn_like(p))
        elif "embed_tokens" in name or "lm_head" in name:
            p.copy_(0.5 * torch.randn_like(p))
        elif family == "gemma2" and ("q_proj" in name or "k_proj" in name):
            # Scores large enough (tens) for the 50 soft-cap to bend them.
            p.copy_(4.0 * torch.randn_like(p) / math.sqrt(p.shape[-1]))
        else:
            p.copy_(torch.randn_like(p) / math.sqrt(p.shape[-1]))
model.save_pretrained(out, safe_serialization=True)
print(f"make_hf: {family}: {cls_name} ({vocab_name} vocabulary, {len(tokens)} tokens) -> {out}")
