// Package atomicfile writes output files so that their final path holds either nothing (or the
// old file) or the complete new file, never a partial one.
//
// Create makes a temporary file in the same directory as the final path, named
// "."+base+".tmp-*" so that ls hides it; the caller writes to it and then either Commit (sync,
// close, rename over the path, sync the directory) or Abort (close and remove). WriteFile does
// all of that for a buffer held in memory, and CheckNew is the "refuse to overwrite without
// --force" check that commands run before they start work; CheckOutputs adds that no output is
// one of the run's inputs or another output. A symbolic link is written through (its target is
// replaced, the link stays), a device or pipe is written in place, and Interrupt, for a signal
// handler, removes every temporary file and every output this process has committed.
//
// Errors of Create, Commit, Abort, WriteFile and CheckNew name the final path
// ("<path>: <what is wrong>"), never the temporary file. Errors of the I/O methods (Write,
// WriteAt, Truncate) name no file: the caller adds the path, and the tensor or key.
package atomicfile
