// Package onnx holds the Go types of ONNX's protobuf schema (onnx.proto, copied unchanged
// from github.com/onnx/onnx at ONNX 1.23.0, commit f7546912; Apache License 2.0, see LICENSE)
// and small helpers to build models with them. gquant writes ONNX models; it does not run
// them.
package onnx

//go:generate protoc --proto_path=. --go_out=. --go_opt=paths=source_relative --go_opt=Monnx.proto=github.com/gquant/gquant/formats/onnx onnx.proto
