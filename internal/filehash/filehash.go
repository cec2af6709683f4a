// Package filehash is the one place that hashes a file for provenance records (gqf manifests,
// verify reports): the hex SHA-256 of its bytes, read in a stream.
package filehash

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
)

// SHA256 returns the lower-case hex SHA-256 of the file at path. Errors name the file.
func SHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %v", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
