"""Which legacy encoding a text that is not UTF-8 is likely in, for the refusal's `iconv -f` advice. Each candidate
decoding is scored by how plausible its words are: letters of the one script that encoding writes, in a shape that
script's words have (Cyrillic `Сбербанк`, not `сБЕРБАНК`; Hangul `삼성전자`; Western words mostly ASCII with an
accented letter, not `Ñáåðáàíê`). GBK read every Windows-1251 word of even length and every Korean word as Chinese,
and Windows-1252 anything else, so MOEX's and KRX's exports got an `iconv` that garbled them (review 231, finding 3);
GBK and Big5 are told apart by their bytes (Big5's trail bytes in the ASCII range), and a Chinese name's full-width
`－ＳＷ` is a Chinese word's (a GBK file of them was called Windows-1252: review375 #5).
When the sample cannot tell two readings apart, both are named."""

from __future__ import annotations

import re
from typing import Callable, NamedTuple

CYRILLIC_VOWELS = frozenset("аеёиоуыэюя")
RUSSIAN_VOWEL_SHARE = 0.43  # of the letters of Russian text (the tie-break of Windows-1251 and KOI8-R)
VOWEL_SAMPLE = 20  # Cyrillic letters the vowel share is told on (`ВТБ` in cp1251 is `бра` in KOI8-R: both words)
PLAUSIBLE = 0.9  # share of a reading's words that must look like words of its script
LETTERS = 0.8  # share of the characters past ASCII a plausible reading makes letters (of any script)
FEW_WORDS = 3  # fewer words than this, or two readings as plausible, and the sample cannot tell: both named


def _cyrillic(c: str) -> bool:
    return "\u0400" <= c <= "\u04ff"


def _hangul(c: str) -> bool:
    return "\uac00" <= c <= "\ud7a3"


def _han(c: str) -> bool:
    return "\u4e00" <= c <= "\u9fff"


def _japanese(c: str) -> bool:  # kana, kanji, full-width forms
    return "\u3040" <= c <= "\u30ff" or _han(c) or "\uff00" <= c <= "\uffef"


def _cjk_word(word: str) -> bool:
    """Chinese: Han characters, with the full-width letters and punctuation Chinese names hold (`阿里巴巴－ＳＷ`)."""
    return all(_han(c) or "\uff00" <= c <= "\uffef" or "\u3000" <= c <= "\u303f" for c in word if ord(c) > 0x7f)


def _latin(c: str) -> bool:
    return c.isalpha() and ord(c) < 0x250


def _cased_as_a_word(word: str) -> bool:
    """All upper, all lower or capitalised: the case of a word, not of mojibake (`сБЕРБАНК`, `ÑáåðáàíÊ`)."""
    letters = "".join(c for c in word if c.isalpha())
    return letters.isupper() or letters.islower() or letters[:1].isupper() and letters[1:].islower()


def _cyrillic_word(word: str) -> bool:
    return all(_cyrillic(c) for c in word if c.isalpha()) and _cased_as_a_word(word)


def _western_word(word: str) -> bool:
    """Latin letters, most of them ASCII (`Société`, `Stück`; `à` alone), cased as a word."""
    accented = [c for c in word if ord(c) > 0x7f]
    return all(_latin(c) for c in accented) and (len(word) <= 2 or len(accented) * 2 <= len(word)) and \
        _cased_as_a_word(word)


class Encoding(NamedTuple):
    said: str  # the name said
    iconv: str  # iconv's codec
    python: str  # Python's codec
    word: Callable[[str], bool]  # whether a word it decodes to is plausible


# In the order preferred between readings as plausible: Cyrillic's cased words, then Hangul, are what other
# encodings' bytes seldom decode to, while GBK decodes any pairs of high bytes, and Windows-1252 any byte at all
ENCODINGS = (
    Encoding("Windows-1251 (Cyrillic)", "cp1251", "cp1251", _cyrillic_word),
    Encoding("KOI8-R (Cyrillic)", "koi8-r", "koi8_r", _cyrillic_word),
    Encoding("EUC-KR (cp949)", "cp949", "cp949", lambda w: all(_hangul(c) for c in w if ord(c) > 0x7f)),
    Encoding("GBK (cp936)", "gbk", "gb18030", _cjk_word),
    Encoding("Shift_JIS (cp932)", "cp932", "cp932", lambda w: all(_japanese(c) for c in w if ord(c) > 0x7f)),
    Encoding("Big5 (Traditional Chinese, with HKSCS)", "big5-hkscs", "big5hkscs", _cjk_word),
    Encoding("Windows-1252", "cp1252", "cp1252", _western_word),
)


def _decoded(head: bytes, codec: str) -> str | None:
    """The bytes in `codec` (a character cut where the sample ends left out); None when they are not."""
    try:
        return head.decode(codec)
    except UnicodeDecodeError as e:
        return head[: e.start].decode(codec) if e.start >= len(head) - 2 else None


def _score(text: str | None, encoding: Encoding) -> tuple[float, int]:
    """(share of plausible words, words) of the words with a letter past ASCII in a decoding."""
    if text is None:
        return 0.0, 0
    beyond = [c for c in text if ord(c) > 0x7f]
    if sum(c.isalpha() for c in beyond) < LETTERS * len(beyond):  # box drawing, symbols: mojibake, not words
        return 0.0, 0
    words = [w for w in re.findall(r"[^\W\d_]+", text) if not w.isascii()]
    return (sum(map(encoding.word, words)) / len(words) if words else 0.0), len(words)


def _vowel_share(text: str) -> float:
    letters = [c for c in text.lower() if _cyrillic(c)]
    return sum(c in CYRILLIC_VOWELS for c in letters) / len(letters) if letters else 0.0


def likely_encodings(head: bytes) -> list[Encoding]:
    """The likely encodings of a text that is not UTF-8, best first: one when the sample tells, two when it cannot
    tell them apart, none when no reading is plausible. BYTE_CHECKS: a byte-level condition an encoding's reading
    also needs (GBK's high bytes in pairs, Big5's trail bytes, Shift_JIS's lead bytes), by its Python codec."""
    byte_checks = BYTE_CHECKS
    scored = []
    for encoding in ENCODINGS:
        text = _decoded(head, encoding.python)
        share, words = _score(text, encoding)
        check = byte_checks.get(encoding.python)
        if share >= PLAUSIBLE and (check is None or check(head)):
            scored.append((encoding, share, words, text or ""))
    if not scored:  # no words to tell by (`Preis (€)`): Windows-1252, as Western tools write, if it decodes
        western = ENCODINGS[-1]
        return [western] if _decoded(head, western.python) is not None else []
    if len(scored) < 2:  # on a word or two (`€` is Windows-1251's `Ђ`), Windows-1252 is as likely: both named
        (first, _, words, _), western = scored[0], ENCODINGS[-1]
        unsure = words < FEW_WORDS and first != western and _decoded(head, western.python) is not None
        return [first, western] if unsure else [first]
    (first, share, words, text), (second, _, _, other) = scored[0], scored[1]
    if first.python == "cp1251" and second.python == "koi8_r":  # one's capitals are the other's small letters
        closer = sorted(((abs(_vowel_share(t) - RUSSIAN_VOWEL_SHARE), e) for e, t in ((first, text), (second, other))),
                        key=lambda pair: pair[0])
        if closer[1][0] - closer[0][0] < 0.05 or sum(map(_cyrillic, text)) < VOWEL_SAMPLE:
            return [first, second]
        return [closer[0][1]]
    return [first] if words >= FEW_WORDS else [first, second]


def _shift_jis_leads(head: bytes) -> bool:
    """Whether most of a text's two-byte characters, read as Shift_JIS, lead with 0x81..0x9F, as kana and the
    common kanji do: Windows-1252's `é` (0xE9) before an ASCII letter reads as a rare kanji, led by 0xE0..0xEF."""
    leads, i = [], 0
    while i < len(head):
        byte = head[i]
        if byte < 0x80 or 0xA1 <= byte <= 0xDF:  # ASCII, or a half-width katakana: one byte
            i += 1
            continue
        leads.append(0x81 <= byte <= 0x9F)
        i += 2
    return sum(leads) >= len(leads) / 2 if leads else False


def _gbk_pairs(head: bytes) -> bool:
    """Whether the high bytes of a text come as GB2312's Chinese does: in pairs, both bytes 0xA1..0xFE (most of
    them). Windows-1252's accented letters come one at a time (`Soci\xe9t\xe9`: a pair of GBK with the ASCII after
    it), Shift_JIS's kanji and kana mostly lead with 0x81..0x9F: both decode as GBK, into CJK noise."""
    runs = list(re.finditer(rb"[\x80-\xff]+", head))
    if any(len(run.group()) % 2 for run in runs if run.end() < len(head)):  # (a run may be cut where the sample ends)
        return False
    pairs = [run.group()[i: i + 2] for run in runs for i in range(0, len(run.group()) - 1, 2)]
    # no whole pair at all (`St\xfcck`: one umlaut, then ASCII) is no Chinese, however it decodes
    return bool(pairs) and sum(0xA1 <= a <= 0xFE and 0xA1 <= b <= 0xFE for a, b in pairs) >= GB2312_SHARE * len(pairs)


GB2312_SHARE = 0.9  # of a text's pairs of high bytes, those in GB2312's rows: Chinese (GBK's rarer forms aside)


def _big5_pairs(head: bytes) -> bool:
    """Whether a text's high bytes come as Big5's characters do: a lead byte 0x81..0xFE, then a trail byte
    0x40..0x7E or 0xA1..0xFE, some trail bytes in the ASCII range (`\xa5N`: 代), which GB2312's never are; without
    one, a text whose pairs all read as GB2312's is GBK's (the GB2312 Chinese that Big5 decodes into noise)."""
    low, pairs, i = 0, 0, 0
    while i < len(head):
        if head[i] < 0x80:
            i += 1
            continue
        if i + 1 >= len(head):  # a character cut where the sample ends
            break
        lead, trail = head[i], head[i + 1]
        if not (0x81 <= lead <= 0xFE and (0x40 <= trail <= 0x7E or 0xA1 <= trail <= 0xFE)):
            return False
        if chr(trail).isalpha() and head[i + 2: i + 3].isalpha():  # `St\xfcck`: an accented letter inside a word
            return False
        low, pairs, i = low + (trail <= 0x7E), pairs + 1, i + 2
    return pairs > 0 and (low > 0 or not _gbk_pairs(head))


BYTE_CHECKS: dict[str, Callable[[bytes], bool]] = {"gb18030": _gbk_pairs, "cp932": _shift_jis_leads,
                                                    "big5hkscs": _big5_pairs}
