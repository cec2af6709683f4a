// Package gqf reads and writes gqf files, gquant's artifact for phone NPUs: one file holding
// a protobuf manifest (model config, tokenizer, tensors with their encodings, provenance and
// the decoder graph in QNN's op vocabulary with an encoding for every activation) and the
// tensor bytes, each tensor aligned to 4096 bytes so that the file can be mapped.
//
// Layout (little-endian):
//
//	offset 0   magic "GQF\x00"
//	offset 4   uint32 format version (FormatVersion)
//	offset 8   uint64 manifest length M
//	offset 16  M bytes: the Manifest, protobuf-encoded
//	           zero padding up to the next multiple of 4096: the data section starts here
//	           tensor buffers, at the offsets (relative to the data section) in the manifest
//
// The package makes no decisions: it checks, encodes and decodes.
package gqf

//go:generate protoc --proto_path=. --go_out=. --go_opt=paths=source_relative gqf.proto
