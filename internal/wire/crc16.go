package wire

// CRC16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), the
// checksum Redis Cluster uses for key slots.
func CRC16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// QueueNode returns the index, among n nodes, of the node that keeps the
// wait queue of key (on the wire): one node, so that the queue has one
// order.
func QueueNode(key string, n int) int {
	return int(CRC16(key)) % n
}
