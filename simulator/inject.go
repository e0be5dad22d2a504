package simulator

// injectError decides whether the n-th chat request (counted from 1 since
// start or the last reset) gets an injected error: a deterministic
// pseudo-random draw from seed and n, compared with rate. Rate 1 fails
// every request and rate 0 none.
func injectError(seed int64, n uint64, rate float64) bool {
	if rate <= 0 {
		return false
	}
	u := float64(splitmix64(uint64(seed)^(n*0x9e3779b97f4a7c15))>>11) / (1 << 53)
	return u < rate
}

// splitmix64 is the SplitMix64 finaliser, a fast well-mixed hash of x.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
