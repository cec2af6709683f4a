package main

import (
	_ "github.com/nlpodyssey/safetensors"
	_ "github.com/schollz/progressbar/v3"
	_ "github.com/spf13/cobra"
	_ "golang.org/x/sys/cpu"
	_ "golang.org/x/sys/unix"
	_ "golang.org/x/term"
	_ "gonum.org/v1/gonum/mat"
	_ "gonum.org/v1/plot"
	_ "google.golang.org/protobuf/proto"
)

func main() {}
