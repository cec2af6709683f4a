package safetensors

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// openIndex opens a sharded checkpoint from its index file. Besides every shard's own
// problems it reports: an index that is not JSON or has no weight_map, a tensor listed twice,
// a shard path leaving the directory, a missing shard (naming one of its tensors), a tensor
// the index places in a shard that does not hold it, and a tensor a shard holds that the index
// does not list there.
func openIndex(indexPath string) (*Checkpoint, error) {
	raw, err := os.ReadFile(indexPath)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", indexPath, unwrapPathError(err))
	}
	var ps problemList
	weightMap := parseIndex(indexPath, raw, &ps)
	if weightMap == nil {
		return nil, ps.err()
	}

	// Group the tensors by shard, keeping the index's first tensor of each for messages.
	byShard := make(map[string][]string)
	var shards []string
	for _, e := range weightMap {
		if _, seen := byShard[e.shard]; !seen {
			shards = append(shards, e.shard)
		}
		byShard[e.shard] = append(byShard[e.shard], e.tensor)
	}
	slices.Sort(shards)

	dir := filepath.Dir(indexPath)
	c := &Checkpoint{}
	opened := make(map[string]*mappedFile)
	for _, shard := range shards {
		if !filepath.IsLocal(shard) {
			ps.add(indexPath, shard, "shard path leaves the checkpoint directory")
			continue
		}
		path := filepath.Join(dir, shard)
		if !exists(path) {
			names := byShard[shard]
			ps.add(indexPath, shard, "shard file not found (the index places %d tensors in it, e.g. %s)", len(names), quoteName(names[0]))
			continue
		}
		if f := openFile(path, &ps); f != nil {
			c.files = append(c.files, f)
			opened[shard] = f
		}
	}

	// Cross-check the index against the shards that opened.
	listed := make(map[string]string, len(weightMap))
	for _, e := range weightMap {
		listed[e.tensor] = e.shard
		f := opened[e.shard]
		if f == nil {
			continue
		}
		if _, ok := slices.BinarySearchFunc(f.header.tensors, e.tensor, byName); !ok {
			ps.add(indexPath, e.tensor, "the index places it in %s, which does not hold it", e.shard)
		}
	}
	for _, shard := range shards {
		f := opened[shard]
		if f == nil {
			continue
		}
		for _, t := range f.header.tensors {
			switch where, ok := listed[t.Name]; {
			case !ok:
				ps.add(f.path, t.Name, "tensor is in the shard but missing from the index %s", filepath.Base(indexPath))
			case where != shard:
				ps.add(f.path, t.Name, "tensor is in the shard but the index places it in %s", where)
			}
		}
	}
	if err := ps.err(); err != nil {
		c.Close()
		return nil, err
	}
	c.build(&ps) // cannot find duplicates now: each tensor is in exactly its listed shard
	if err := ps.err(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// indexEntry is one weight_map entry.
type indexEntry struct {
	tensor, shard string
}

// parseIndex reads the weight_map of an index file, in file order; nil when unusable.
func parseIndex(path string, raw []byte, ps *problemList) []indexEntry {
	if err := jsonError(raw); err != nil {
		ps.add(path, "", "not valid JSON: %v", err)
		return nil
	}
	top, err := objectMembers(raw)
	if err != nil {
		ps.add(path, "", "%v", err)
		return nil
	}
	var wm *member
	for i := range top {
		if top[i].Key == "weight_map" {
			wm = &top[i]
		}
	}
	if wm == nil {
		ps.add(path, "weight_map", "missing")
		return nil
	}
	members, err := objectMembers(wm.Value)
	if err != nil {
		ps.add(path, "weight_map", "%v", err)
		return nil
	}
	if len(members) == 0 {
		ps.add(path, "weight_map", "empty: the index lists no tensors")
		return nil
	}
	first := make(map[string]string, len(members))
	out := make([]indexEntry, 0, len(members))
	for _, m := range members {
		shard, ok := rawString(m.Value)
		if !ok {
			ps.add(path, m.Key, "weight_map value is %s, want a shard file name", jsonKind(m.Value))
			continue
		}
		if prev, dup := first[m.Key]; dup {
			ps.add(path, m.Key, "listed twice in weight_map (in %s and %s)", prev, shard)
			continue
		}
		first[m.Key] = shard
		out = append(out, indexEntry{tensor: m.Key, shard: shard})
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// byName compares a tensor's name with a name, for binary search in sorted listings.
func byName(t TensorInfo, name string) int {
	switch {
	case t.Name < name:
		return -1
	case t.Name > name:
		return 1
	}
	return 0
}
