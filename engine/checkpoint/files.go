package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
)

// writeSynced creates path with data and fsyncs it. Inside a checkpoint's temporary
// directory this is enough: the whole directory is renamed into place afterwards.
func writeSynced(path string, data []byte) (err error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	return f.Sync()
}

// hashFile returns a regular file's size and sha256.
func hashFile(path string) (fileEntry, error) {
	f, err := os.Open(path)
	if err != nil {
		return fileEntry{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fileEntry{}, err
	}
	if !fi.Mode().IsRegular() {
		return fileEntry{}, fmt.Errorf("%s is not a regular file", path)
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return fileEntry{}, err
	}
	return fileEntry{Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}
