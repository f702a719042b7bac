package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
)

// WriteTextAndJSON makes dir and writes into it what text writes, as the
// file textName (a person's reading: an exploration's, a coverage's, a
// sweep's table), and v, indented, as jsonName (a program's, read back to
// merge or judge again).
func WriteTextAndJSON(dir, textName string, text func(io.Writer), jsonName string, v any) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	var b bytes.Buffer
	text(&b)
	return errors.Join(os.WriteFile(filepath.Join(dir, textName), b.Bytes(), 0o644),
		os.WriteFile(filepath.Join(dir, jsonName), append(js, '\n'), 0o644))
}
