package tbread

import "testing"

// TestMaskedCRCGolden holds the reader's checksum to a record TensorFlow wrote:
// tensorboard/data/server/masked_crc.rs, Event(file_version=b"CRC test, one two").
func TestMaskedCRCGolden(t *testing.T) {
	if got := Masked([]byte("\x1a\x11CRC test, one two")); got != 0x5794d08a {
		t.Fatalf("masked crc %#x, want 0x5794d08a", got)
	}
	// RFC 3720 B.4: CRC-32C of 32 zero bytes.
	if got := CRC32C(make([]byte, 32)); got != 0x8a9136aa {
		t.Fatalf("crc32c(zeros) %#x, want 0x8a9136aa", got)
	}
}
