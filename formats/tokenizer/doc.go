// Package tokenizer loads HuggingFace tokenizers (tokenizer.json with
// tokenizer_config.json and generation_config.json), encodes and decodes text
// exactly as HF tokenizers does, converts the vocabulary to llama.cpp's
// tokenizer.ggml.* GGUF metadata and builds a tokenizer back from that metadata.
//
// Two kinds are supported:
//
//   - SentencePiece-style BPE as transformers' LlamaConverter and
//     GemmaConverter write it (BPE model with byte_fallback; Prepend/Replace
//     normalizer or Metaspace pre-tokenizer; Gemma: a Replace normalizer and
//     a Split on " ", which finds nothing after it, and many added tokens:
//     <start_of_turn>, <end_of_turn>, runs of newlines, tabs and ▁, HTML tags);
//     GGUF model "llama".
//   - Byte-level BPE (GPT-2, Llama-3, Qwen2/Qwen3): a Split pre-tokenizer with
//     one of the known regular expressions, implemented by hand because Go's
//     regexp has no look-ahead, followed by the ByteLevel mapping; GGUF model
//     "gpt2".
//
// The HF pipeline is: split out added tokens, normalize, pre-tokenize, run the
// BPE model on every piece, post-process (add BOS/EOS). A tokenizer built from
// GGUF metadata follows llama.cpp instead: SentencePiece vocabularies merge by
// token score, byte-level ones by merge rank.
package tokenizer
