// Command gquant converts, calibrates, quantizes, runs and verifies LLM checkpoints.
package main

import "os"

func main() { os.Exit(execute(os.Args[1:], os.Stdout, os.Stderr)) }
