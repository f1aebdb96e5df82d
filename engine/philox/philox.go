package philox

import "math/bits"

// The multipliers and the key schedule's Weyl increments of Philox4x32 (Random123's
// PHILOX_M4x32_0/1 and PHILOX_W32_0/1).
const (
	m0, m1 = 0xD2511F53, 0xCD9E8D57
	w0, w1 = 0x9E3779B9, 0xBB67AE85
)

// Rounds is the number of rounds: Philox4x32-10, the variant with Random123's known answers.
const Rounds = 10

// Block is the block of counter ctr under key: ten rounds, each two 32×32→64-bit products
// whose halves are exchanged and xored with the key, the key bumped between rounds.
func Block(ctr [4]uint32, key [2]uint32) [4]uint32 {
	for r := range Rounds {
		if r > 0 {
			key[0], key[1] = key[0]+w0, key[1]+w1
		}
		hi0, lo0 := bits.Mul32(m0, ctr[0])
		hi1, lo1 := bits.Mul32(m1, ctr[2])
		ctr = [4]uint32{hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0}
	}
	return ctr
}

// Uniform is the uniform in [0, 1) of position pos of stream under seed: the first two words
// of the block of counter (pos, 0, stream's low word, its high word) under key (seed's low
// word, its high word), their top 53 bits over 2⁵³.
func Uniform(seed, stream uint64, pos uint32) float64 {
	x := Block([4]uint32{pos, 0, uint32(stream), uint32(stream >> 32)}, [2]uint32{uint32(seed), uint32(seed >> 32)})
	return float64((uint64(x[0])<<32|uint64(x[1]))>>11) * 0x1p-53
}
