package studio

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/supervaize/svz/internal/fingerprint"
)

// EnvPrivateKey holds the controller's RSA private key: Studio encrypts the agents' parameters to
// its public key, which server.register sends.
const EnvPrivateKey = "SUPERVAIZER_PRIVATE_KEY"

// MinKeyBits is the smallest RSA key accepted (the reference generates 2048-bit keys).
const MinKeyBits = 2048

// ParsePrivateKey reads SUPERVAIZER_PRIVATE_KEY: an RSA private key in PEM, PKCS#8 ("PRIVATE
// KEY", what svz and the reference generate) or PKCS#1 ("RSA PRIVATE KEY"), at least 2048 bits. A
// value on one line with literal \n sequences is accepted (some platforms cannot hold newlines).
// Errors name the variable and the key's fingerprint, never the key.
func ParsePrivateKey(v string) (*rsa.PrivateKey, error) {
	fp := fingerprint.Of(v)
	v = strings.TrimSpace(v)
	if !strings.Contains(v, "\n") && strings.Contains(v, `\n`) {
		v = strings.ReplaceAll(v, `\n`, "\n")
	}
	block, rest := pem.Decode([]byte(v))
	if block == nil || strings.TrimSpace(string(rest)) != "" {
		return nil, fmt.Errorf("%s (fingerprint %s) is not one PEM block: give the RSA private key in PKCS#8 PEM (-----BEGIN PRIVATE KEY-----)", EnvPrivateKey, fp)
	}
	var key *rsa.PrivateKey
	switch block.Type {
	case "PRIVATE KEY":
		inner, err := pkcs8RSA(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s (fingerprint %s) %w", EnvPrivateKey, fp, err)
		}
		k, err := x509.ParsePKCS1PrivateKey(inner)
		if err != nil {
			return nil, fmt.Errorf("%s (fingerprint %s) is not a valid PKCS#8 RSA private key", EnvPrivateKey, fp)
		}
		key = k
	case "RSA PRIVATE KEY":
		k, err := x509.ParsePKCS1PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s (fingerprint %s) is not a valid PKCS#1 RSA private key", EnvPrivateKey, fp)
		}
		key = k
	default:
		return nil, fmt.Errorf("%s (fingerprint %s) is a PEM %q block: give the RSA private key in PKCS#8 PEM (-----BEGIN PRIVATE KEY-----)", EnvPrivateKey, fp, block.Type)
	}
	if n := key.N.BitLen(); n < MinKeyBits {
		return nil, fmt.Errorf("%s (fingerprint %s) is a %d-bit RSA key: use %d bits or more", EnvPrivateKey, fp, n, MinKeyBits)
	}
	return key, nil
}

// oidRSA is rsaEncryption (RFC 8017), the algorithm of RSA keys in PKCS#8 and SubjectPublicKeyInfo.
var oidRSA = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 1}

// pkcs8RSA returns the PKCS#1 key inside a PKCS#8 PrivateKeyInfo, refusing any algorithm but RSA.
// It is written here rather than calling x509.ParsePKCS8PrivateKey, which links the parsers of
// every key type into serverless bootstraps.
func pkcs8RSA(der []byte) ([]byte, error) {
	var info struct {
		Version    int
		Algorithm  pkix.AlgorithmIdentifier
		PrivateKey []byte
	}
	rest, err := asn1.Unmarshal(der, &info)
	switch {
	case err != nil || len(rest) != 0:
		return nil, errors.New("is not a valid PKCS#8 private key")
	case !info.Algorithm.Algorithm.Equal(oidRSA):
		return nil, fmt.Errorf("is not an RSA key (algorithm %s): Studio encrypts to an RSA key", info.Algorithm.Algorithm)
	}
	return info.PrivateKey, nil
}

// PublicKeyPEM is the public half of key as server.register sends it (SubjectPublicKeyInfo PEM).
func PublicKeyPEM(key *rsa.PublicKey) (string, error) {
	spki := struct {
		Algorithm pkix.AlgorithmIdentifier
		PublicKey asn1.BitString
	}{
		Algorithm: pkix.AlgorithmIdentifier{Algorithm: oidRSA, Parameters: asn1.NullRawValue},
		PublicKey: asn1.BitString{Bytes: x509.MarshalPKCS1PublicKey(key), BitLength: 0},
	}
	spki.PublicKey.BitLength = 8 * len(spki.PublicKey.Bytes)
	der, err := asn1.Marshal(spki)
	if err != nil {
		return "", fmt.Errorf("encode the RSA public key: %w", err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})), nil
}

// Errors of Decrypt. They say what is wrong with the blob, never what it holds.
var (
	ErrNotBase64    = errors.New("encrypted value is not base64")
	ErrTooShort     = errors.New("encrypted value is too short for an RSA-encrypted key of this controller's key size, an IV and one AES block (was it encrypted to another public key?)")
	ErrWrongKey     = errors.New("encrypted value cannot be decrypted with this controller's private key (was it encrypted to another public key?)")
	ErrBadPadding   = errors.New("encrypted value is corrupted: bad AES-CBC length or padding")
	ErrInvalidUTF8  = errors.New("decrypted value is not UTF-8 text")
	errEmptyEncrypt = errors.New("encrypted value is empty")
)

// Decrypt opens a value Studio encrypted to the controller's public key (spec §7.5): base64 of
// RSA-OAEP(SHA-256, MGF1-SHA-256, no label) of a 32-byte AES key ‖ a 16-byte IV ‖ AES-256-CBC
// ciphertext with PKCS#7 padding. The RSA part is as long as the key's modulus (256 bytes for
// RSA-2048). Any other shape, key or padding is an error; nothing of the value is in it.
func Decrypt(key *rsa.PrivateKey, encrypted string) (string, error) {
	encrypted = strings.TrimSpace(encrypted)
	if encrypted == "" {
		return "", errEmptyEncrypt
	}
	raw, err := base64.StdEncoding.DecodeString(encrypted)
	if err != nil {
		return "", ErrNotBase64
	}
	k := key.Size()
	if len(raw) < k+aes.BlockSize+aes.BlockSize {
		return "", ErrTooShort
	}
	aesKey, err := rsa.DecryptOAEP(sha256.New(), nil, key, raw[:k], nil)
	if err != nil || len(aesKey) != 32 {
		return "", ErrWrongKey
	}
	iv, data := raw[k:k+aes.BlockSize], raw[k+aes.BlockSize:]
	if len(data)%aes.BlockSize != 0 {
		return "", ErrBadPadding
	}
	block, err := aes.NewCipher(aesKey)
	if err != nil {
		return "", ErrWrongKey
	}
	plain := make([]byte, len(data))
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(plain, data)
	plain, ok := unpad(plain)
	if !ok {
		return "", ErrBadPadding
	}
	if !utf8.Valid(plain) {
		return "", ErrInvalidUTF8
	}
	return string(plain), nil
}

// unpad removes PKCS#7 padding, checking every padding byte in constant time.
func unpad(b []byte) ([]byte, bool) {
	if len(b) == 0 {
		return nil, false
	}
	n := int(b[len(b)-1])
	if n == 0 || n > aes.BlockSize || n > len(b) {
		return nil, false
	}
	want := make([]byte, n)
	for i := range want {
		want[i] = byte(n)
	}
	if subtle.ConstantTimeCompare(b[len(b)-n:], want) != 1 {
		return nil, false
	}
	return b[:len(b)-n], true
}
