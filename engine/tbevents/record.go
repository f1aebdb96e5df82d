package tbevents

import (
	"encoding/binary"
	"hash/crc32"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maskedCRC is TFRecord's checksum: LevelDB's masking keeps a CRC of bytes that embed CRCs
// from being degenerate.
func maskedCRC(b []byte) uint32 {
	crc := crc32.Checksum(b, castagnoli)
	return ((crc >> 15) | (crc << 17)) + 0xa282ead8
}

// appendRecord frames data as one TFRecord.
func appendRecord(dst, data []byte) []byte {
	var head [8]byte
	binary.LittleEndian.PutUint64(head[:], uint64(len(data)))
	dst = append(dst, head[:]...)
	dst = binary.LittleEndian.AppendUint32(dst, maskedCRC(head[:]))
	dst = append(dst, data...)
	return binary.LittleEndian.AppendUint32(dst, maskedCRC(data))
}
