package gguf

import (
	"errors"
	"fmt"
)

// ErrNotFound is wrapped by the typed getters when a key is absent, so that callers can tell
// an optional key that is missing (errors.Is(err, ErrNotFound)) from one of the wrong type.
var ErrNotFound = errors.New("key not found")

// Get returns the metadata entry with the given key.
func (f *File) Get(key string) (KV, bool) {
	i, ok := f.keys[key]
	if !ok {
		return KV{}, false
	}
	return f.KVs[i], true
}

// Lookup returns the value of key as a T, which must be the exact Go type of the stored value
// (see KV). The error names the file and key, and either wraps ErrNotFound or gives the
// stored and wanted types: "model.gguf: llama.block_count: has type INT32, want UINT32".
func Lookup[T any](f *File, key string) (T, error) {
	var zero T
	kv, ok := f.Get(key)
	if !ok {
		return zero, fmt.Errorf("%s: %s: %w", f.Name, key, ErrNotFound)
	}
	v, ok := kv.Value.(T)
	if !ok {
		return zero, fmt.Errorf("%s: %s: has type %s, want %s", f.Name, key, describe(kv.Value), describe(zero))
	}
	return v, nil
}

// String returns a STRING value.
func (f *File) String(key string) (string, error) { return Lookup[string](f, key) }

// Bool returns a BOOL value.
func (f *File) Bool(key string) (bool, error) { return Lookup[bool](f, key) }

// Uint16 returns a UINT16 value.
func (f *File) Uint16(key string) (uint16, error) { return Lookup[uint16](f, key) }

// Uint32 returns a UINT32 value.
func (f *File) Uint32(key string) (uint32, error) { return Lookup[uint32](f, key) }

// Int32 returns an INT32 value.
func (f *File) Int32(key string) (int32, error) { return Lookup[int32](f, key) }

// Uint64 returns a UINT64 value.
func (f *File) Uint64(key string) (uint64, error) { return Lookup[uint64](f, key) }

// Float32 returns a FLOAT32 value.
func (f *File) Float32(key string) (float32, error) { return Lookup[float32](f, key) }

// Float64 returns a FLOAT64 value.
func (f *File) Float64(key string) (float64, error) { return Lookup[float64](f, key) }

// Strings returns an ARRAY of STRING.
func (f *File) Strings(key string) ([]string, error) { return Lookup[[]string](f, key) }

// Float32s returns an ARRAY of FLOAT32.
func (f *File) Float32s(key string) ([]float32, error) { return Lookup[[]float32](f, key) }

// Int32s returns an ARRAY of INT32.
func (f *File) Int32s(key string) ([]int32, error) { return Lookup[[]int32](f, key) }

// Uint32s returns an ARRAY of UINT32.
func (f *File) Uint32s(key string) ([]uint32, error) { return Lookup[[]uint32](f, key) }
