//! GGML block quantization types behind one trait (dequantize, quantize, dot products).
