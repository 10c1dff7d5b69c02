//go:build !cgo

package main

import "errors"

const (
	inputCubin   = 1
	inputPTX     = 2
	inputLTOIR   = 3
	inputLibrary = 6
)

type input struct {
	kind int
	data []byte
	path string
	name string
}

var errNoCgo = errors.New("ltolink loads libNVVM and nvJitLink through cgo: build it with CGO_ENABLED=1")

func openLTO(string, string) error                 { return errNoCgo }
func nvvmCompile([]byte, []string) ([]byte, error) { return nil, errNoCgo }
func njlLink([]string, []input) ([]byte, error)    { return nil, errNoCgo }
