"""ForgottenRefusals: the names of refused streams that fell out of the server's bounded memory of refusals
(rejections.MAX_REFUSED_STREAMS_KEPT, oldest first), so that `streams NAME`, `get` and `ask` on one say "refused
earlier, no longer remembered" rather than "never seen" / "has sent no data" (review336 #8: a feed of 20,000 bad
option names made the first one read as a feed that never sent anything).

Every forgotten name is kept as a few bits of a fixed-size Bloom filter: memory stays bounded (FILTER_BYTES at most,
taken at the first name forgotten) whatever the flood, and a name it does not hold was certainly never forgotten
(no false negatives), so "has sent no data" stays exact. A name it holds was forgotten, or, at the rate
``false_match`` estimates from the bits set, is one never refused that matches by chance: said beside the answer
once that rate is no longer negligible (about 1% past 870,000 names forgotten).
"""

from __future__ import annotations

import hashlib

FILTER_BYTES = 1 << 20  # 8,388,608 bits
HASHES = 7  # bits per name: the fewest false matches for ~830,000 names in FILTER_BYTES
NEGLIGIBLE_FALSE_MATCH = 1e-3  # below it, a match is said as a fact


class ForgottenRefusals:
    """A Bloom filter of the refused streams' names that fell out of the server's memory of refusals."""

    def __init__(self, size_bytes: int = FILTER_BYTES) -> None:
        self._size_bits = size_bytes * 8
        self._bits: bytearray | None = None  # taken at the first name: a service that forgets none holds nothing
        self._set = 0  # bits set, for the false match rate

    def add(self, name: str) -> None:
        if self._bits is None:
            self._bits = bytearray(self._size_bits // 8)
        for bit in self._positions(name):
            byte, mask = divmod(bit, 8)
            if not self._bits[byte] & (1 << mask):
                self._bits[byte] |= 1 << mask
                self._set += 1

    def __contains__(self, name: object) -> bool:
        if self._bits is None or not isinstance(name, str):
            return False
        bits = self._bits
        return all(bits[bit >> 3] & (1 << (bit & 7)) for bit in self._positions(name))

    @property
    def false_match(self) -> float:
        """The chance that a name never forgotten is held all the same: the share of bits set, to the HASHES."""
        return (self._set / self._size_bits) ** HASHES

    def _positions(self, name: str) -> list[int]:
        """HASHES bit positions of ``name`` (double hashing over one 128-bit BLAKE2b digest)."""
        digest = hashlib.blake2b(name.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        first, step = int.from_bytes(digest[:8], "little"), int.from_bytes(digest[8:], "little") | 1
        return [(first + i * step) % self._size_bits for i in range(HASHES)]
