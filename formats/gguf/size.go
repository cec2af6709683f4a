package gguf

// FileSize lays h out (Layout) and returns the size of the file it describes: the header,
// padded to the alignment, and every tensor's data, each padded to the alignment.
func (h *Header) FileSize() (uint64, error) {
	if err := h.Layout(); err != nil {
		return 0, err
	}
	_, total := h.encode()
	return total, nil
}
