#!/usr/bin/env python3
"""Write a valid kvtree file (CRC32 trailer) holding N keys under one key,
as a halt file that is far too large: gen_big_halt.py N PATH.
Format (docs/formats.md): magic, type 1, version 1, size, flags 1, packed
hash (count, then key NUL child ...), CRC32 of everything before it."""
import struct
import sys
import zlib

n, path = int(sys.argv[1]), sys.argv[2]
body = bytearray(struct.pack(">I", 1) + b"X\0" + struct.pack(">I", n))
for i in range(n):
    body += b"key-%08d\0" % i + struct.pack(">I", 0)
size = 20 + len(body) + 4
head = struct.pack(">IHHQI", 0x951FC3F5, 1, 1, size, 1)
data = head + bytes(body)
with open(path, "wb") as f:
    f.write(data + struct.pack(">I", zlib.crc32(data) & 0xFFFFFFFF))
