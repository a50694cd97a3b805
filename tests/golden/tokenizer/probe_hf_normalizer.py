"""Lists the code points whose NFC differs between Hugging Face `tokenizers` (old Unicode tables in its
normalization crate) and utf8proc (the library text/tokenizer/normalizer.cc uses), as ranges for
kHfUnknownRanges in normalizer.cc. Takes ~30 s; rerun when either library is upgraded.

  build/venv/bin/python tests/golden/tokenizer/probe_hf_normalizer.py
"""
import ctypes
import unicodedata

from tokenizers import normalizers

lib = ctypes.CDLL("libutf8proc.so.2")
lib.utf8proc_NFC.restype = ctypes.c_void_p
lib.utf8proc_NFC.argtypes = [ctypes.c_char_p]
libc = ctypes.CDLL("libc.so.6")
libc.free.argtypes = [ctypes.c_void_p]


def utf8proc_nfc(s):
    p = lib.utf8proc_NFC(s.encode())
    r = ctypes.string_at(p).decode()
    libc.free(p)
    return r


def main():
    hf = normalizers.NFC()
    found = set()
    # Combining classes and decompositions: the code point alone, after/before marks of low/high class.
    for cp in range(1, 0x110000):
        if 0xD800 <= cp < 0xE000:
            continue
        c = chr(cp)
        for s in (c, "a" + c + "\u0334", "a\u0345" + c, "a\u0301" + c, c + "\u0301"):
            if hf.normalize_str(s) != utf8proc_nfc(s):
                found.add(cp)
                break
    # Compositions: every canonical pair, with its composite and second character.
    for cp in range(0x110000):
        if 0xD800 <= cp < 0xE000:
            continue
        d = unicodedata.decomposition(chr(cp))
        if not d or d.startswith("<"):
            continue
        parts = [chr(int(x, 16)) for x in d.split()]
        s = "".join(parts)
        if hf.normalize_str(s) != utf8proc_nfc(s):
            found.update({cp, ord(parts[-1])})
    ranges = []
    for c in sorted(found):
        if ranges and ranges[-1][1] + 1 == c:
            ranges[-1][1] = c
        else:
            ranges.append([c, c])
    print(f"{len(found)} code points in {len(ranges)} ranges:")
    print(", ".join(f"{{0x{a:X}, 0x{b:X}}}" for a, b in ranges))


if __name__ == "__main__":
    main()
