#!/usr/bin/env python3
"""Writes vectors.json: values encrypted as Studio encrypts parameters_encrypted (spec §7.5), with
the Python `cryptography` package the reference SDK uses, for TestDecryptReferenceVectors.

    python3 core/studio/testdata/gen_vectors.py > core/studio/testdata/vectors.json

Hybrid scheme: a random 32-byte AES key and 16-byte IV; the key wrapped with RSA-OAEP
(MGF1-SHA256, SHA-256, no label); the UTF-8 value PKCS#7-padded and encrypted with AES-256-CBC;
base64 of wrapped key || IV || ciphertext.
"""
import base64
import json
import os

from cryptography.hazmat.primitives import hashes, padding as sympadding, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes


def seal(public_key, text):
    aes_key, iv = os.urandom(32), os.urandom(16)
    wrapped = public_key.encrypt(
        aes_key,
        padding.OAEP(mgf=padding.MGF1(algorithm=hashes.SHA256()), algorithm=hashes.SHA256(), label=None),
    )
    padder = sympadding.PKCS7(128).padder()
    padded = padder.update(text.encode("utf-8")) + padder.finalize()
    enc = Cipher(algorithms.AES(aes_key), modes.CBC(iv)).encryptor()
    return base64.b64encode(wrapped + iv + enc.update(padded) + enc.finalize()).decode("ascii")


def pem(key):
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode("ascii")


def main():
    keys = {bits: rsa.generate_private_key(public_exponent=65537, key_size=bits) for bits in (2048, 3072)}
    plains = [
        "",
        "x",
        "exactly16bytes!!",
        json.dumps([{"name": "HELLO_GREETING", "value": "Bonjour"}, {"name": "OPENAI_API_KEY", "value": "sk-test-é✓"}]),
        "ünïcødé " * 200,
    ]
    vectors = []
    for bits, key in keys.items():
        for p in plains:
            vectors.append({"key_bits": bits, "plain": p, "encrypted": seal(key.public_key(), p)})
    print(json.dumps({"keys": {str(b): pem(k) for b, k in keys.items()}, "vectors": vectors}, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
