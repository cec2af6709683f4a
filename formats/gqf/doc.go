// Package gqf reads and writes gqf files, gquant's artifact for phone NPUs: one file holding
// a protobuf manifest (model config, tokenizer, tensors with their encodings, provenance and
// the decoder graph in QNN's op vocabulary with an encoding for every activation) and the
// tensor bytes, each tensor aligned to 4096 bytes so that the file can be mapped.
//
// Layout (little-endian), format version 2:
//
//	offset 0   magic "GQF\x00"
//	offset 4   uint32 format version (FormatVersion)
//	offset 8   uint64 manifest offset O (from the start of the file)
//	offset 16  uint64 manifest length M
//	offset 4096  the data section: tensor buffers, at the offsets (relative to the data
//	           section) in the manifest, data at multiples of 4096, scales and zeros of 64
//	offset O   M bytes: the Manifest, protobuf-encoded (O is the end of the data section)
//
// The manifest comes last so that a converter streams the tensors into place (Writer) and
// writes the manifest, which may depend on the written weights (activation encodings
// calibrated on them), at the end. Version 1 files (the manifest right after a 16-byte
// header, the data section at the next multiple of 4096) are read too.
//
// The package makes no decisions: it checks, encodes and decodes.
package gqf

//go:generate protoc --proto_path=. --go_out=. --go_opt=paths=source_relative gqf.proto
