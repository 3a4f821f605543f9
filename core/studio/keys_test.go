package studio_test

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"strings"
	"testing"

	"github.com/supervaize/svz/core/studio"
	"github.com/supervaize/svz/internal/devstudio"
	"github.com/supervaize/svz/internal/fingerprint"
)

// TestDecryptReferenceVectors decrypts values encrypted by Python's cryptography package the way
// Studio does (testdata/gen_vectors.py), for 2048- and 3072-bit keys.
func TestDecryptReferenceVectors(t *testing.T) {
	v := vectors(t)
	keys := map[int]*rsa.PrivateKey{}
	for bits, p := range v.Keys {
		k, err := studio.ParsePrivateKey(p)
		if err != nil {
			t.Fatal(err)
		}
		keys[k.N.BitLen()] = k
		_ = bits
	}
	if len(v.Vectors) < 10 {
		t.Fatalf("only %d vectors", len(v.Vectors))
	}
	for i, vec := range v.Vectors {
		got, err := studio.Decrypt(keys[vec.KeyBits], vec.Encrypted)
		if err != nil || got != vec.Plain {
			t.Errorf("vector %d (%d bits): %q, %v; want %q", i, vec.KeyBits, got, err, vec.Plain)
		}
		// The other key cannot open it.
		other := keys[2048]
		if vec.KeyBits == 2048 {
			other = keys[3072]
		}
		if _, err := studio.Decrypt(other, vec.Encrypted); err == nil {
			t.Errorf("vector %d opened with the wrong key", i)
		}
	}
	// What the stand-in encrypts (its own implementation) opens too.
	for _, plain := range []string{"", "a", strings.Repeat("€", 1000)} {
		enc, err := devstudio.Encrypt(&keys[2048].PublicKey, []byte(plain))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := studio.Decrypt(keys[2048], enc); err != nil || got != plain {
			t.Errorf("stand-in value %q: %q %v", plain, got, err)
		}
	}
}

func TestDecryptRefusesBadBlobs(t *testing.T) {
	v := vectors(t)
	key := testKey(t)
	var good string
	for _, vec := range v.Vectors {
		if vec.KeyBits == 2048 && strings.HasPrefix(vec.Plain, "[") {
			good = vec.Encrypted
		}
	}
	raw, _ := base64.StdEncoding.DecodeString(good)
	flip := func(i int) string {
		b := append([]byte(nil), raw...)
		b[i] ^= 0x01
		return base64.StdEncoding.EncodeToString(b)
	}
	otherKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := devstudio.Encrypt(&otherKey.PublicKey, []byte(`[{"name":"X","value":"secret-value-1"}]`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, blob string
		want       error
	}{
		{"not base64", "%%%", studio.ErrNotBase64},
		{"too short", base64.StdEncoding.EncodeToString(raw[:256+16]), studio.ErrTooShort},
		{"wrong key", foreign, studio.ErrWrongKey},
		{"RSA part corrupted", flip(10), studio.ErrWrongKey},
		{"last block corrupted", flip(len(raw) - 1), studio.ErrBadPadding},
		{"ragged ciphertext", base64.StdEncoding.EncodeToString(raw[:len(raw)-3]), studio.ErrBadPadding},
	} {
		got, err := studio.Decrypt(key, tc.blob)
		if !errors.Is(err, tc.want) || got != "" {
			t.Errorf("%s: %q, %v; want %v", tc.name, got, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret-value") {
			t.Errorf("%s: the error shows the value", tc.name)
		}
	}
	if _, err := studio.Decrypt(key, "  "); err == nil {
		t.Error("empty value accepted")
	}
}

func FuzzDecrypt(f *testing.F) {
	v := vectors(f)
	for _, vec := range v.Vectors {
		if vec.KeyBits == 2048 {
			f.Add(vec.Encrypted)
		}
	}
	f.Add("")
	f.Add("AAAA")
	key := testKey(f)
	f.Fuzz(func(t *testing.T, blob string) {
		plain, err := studio.Decrypt(key, blob)
		if err != nil && plain != "" {
			t.Fatal("an error with a value")
		}
		if err == nil {
			// Only an authentic blob decrypts; re-check that it has the scheme's shape.
			raw, derr := base64.StdEncoding.DecodeString(strings.TrimSpace(blob))
			if derr != nil || len(raw) < 256+32 || (len(raw)-256)%16 != 0 {
				t.Fatalf("decrypted a blob of the wrong shape (%d bytes)", len(raw))
			}
		}
	})
}

func TestParsePrivateKey(t *testing.T) {
	good := vectors(t).Keys["2048"]
	k, err := studio.ParsePrivateKey(good)
	if err != nil || k.N.BitLen() != 2048 {
		t.Fatal(err)
	}
	// One line with \n escapes, and PKCS#1, are accepted.
	if _, err := studio.ParsePrivateKey(strings.ReplaceAll(strings.TrimSpace(good), "\n", `\n`)); err != nil {
		t.Errorf("escaped newlines: %v", err)
	}
	pkcs1 := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}))
	if _, err := studio.ParsePrivateKey(pkcs1); err != nil {
		t.Errorf("PKCS#1: %v", err)
	}
	// The public key server.register sends is the standard SubjectPublicKeyInfo.
	got, err := studio.PublicKeyPEM(&k.PublicKey)
	std, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil || got != string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: std})) {
		t.Errorf("public key PEM %v:\n%s", err, got)
	}
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	smallDER, _ := x509.MarshalPKCS8PrivateKey(small)
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecDER, _ := x509.MarshalPKCS8PrivateKey(ec)
	pub, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
	for _, tc := range []struct{ name, pem, want string }{
		{"garbage", "not a key", "is not one PEM block"},
		{"public key", string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})), `is a PEM "PUBLIC KEY" block`},
		{"small", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: smallDER})), "is a 1024-bit RSA key"},
		{"ecdsa", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecDER})), "is not an RSA key (algorithm 1.2.840.10045.2.1)"},
		{"pkcs8 garbage", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{0x30, 0x03, 0x02, 0x01, 0x00}})), "is not a valid PKCS#8 private key"},
		{"truncated", good[:len(good)/2] + "\n-----END PRIVATE KEY-----", "PEM"},
		{"two blocks", good + good, "is not one PEM block"},
	} {
		_, err := studio.ParsePrivateKey(tc.pem)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "SUPERVAIZER_PRIVATE_KEY (fingerprint "+fingerprint.Of(tc.pem)+")") {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
		if err != nil && len(tc.pem) > 40 && strings.Contains(err.Error(), tc.pem[30:40]) {
			t.Errorf("%s: the error quotes the key", tc.name)
		}
	}
}

func TestDecodeParameterValues(t *testing.T) {
	got, err := studio.DecodeParameterValues(`[{"name":"A","value":"1"},{"name":"B","value":null}]`)
	if err != nil || len(got) != 2 || got[0] != (studio.ParameterValue{Name: "A", Value: "1", Set: true}) || got[1] != (studio.ParameterValue{Name: "B"}) {
		t.Fatalf("%+v %v", got, err)
	}
	for _, bad := range []string{`{}`, `[1]`, `[{"value":"v"}]`, `[{"name":"A"}]`, `[{"name":"A","value":3}]`, `[null]`} {
		if _, err := studio.DecodeParameterValues(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func FuzzDecodeParameterValues(f *testing.F) {
	f.Add(`[{"name":"A","value":"secret-1"}]`)
	f.Add(`[{"name":"","value":"x"}]`)
	f.Fuzz(func(t *testing.T, plain string) {
		vals, err := studio.DecodeParameterValues(plain)
		if err != nil {
			if strings.Contains(err.Error(), "secret-1") {
				t.Fatal("error shows a value")
			}
			return
		}
		for _, v := range vals {
			if v.Name == "" || (!v.Set && v.Value != "") {
				t.Fatalf("bad value %+v", v)
			}
		}
	})
}

// sealRaw encrypts padded (already a whole number of AES blocks, its padding chosen by the test)
// the way Studio does, with no padding of its own: RSA-OAEP-SHA-256 of a fresh AES-256 key ‖ IV ‖
// AES-256-CBC.
func sealRaw(t *testing.T, pub *rsa.PublicKey, padded []byte) string {
	t.Helper()
	if len(padded)%aes.BlockSize != 0 {
		t.Fatalf("%d bytes is not whole blocks", len(padded))
	}
	key, iv := make([]byte, 32), make([]byte, aes.BlockSize)
	_, _ = rand.Read(key)
	_, _ = rand.Read(iv)
	wrapped, err := rsa.EncryptOAEP(sha256.New(), rand.Reader, pub, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := aes.NewCipher(key)
	data := make([]byte, len(padded))
	cipher.NewCBCEncrypter(block, iv).CryptBlocks(data, padded)
	return base64.StdEncoding.EncodeToString(append(append(wrapped, iv...), data...))
}

// TestDecryptPadding: PKCS#7 padding is checked whole: a corrupt byte anywhere in the padding,
// a pad length of 0 or over a block, is ErrBadPadding; correct padding of every length (1 to a
// whole block) opens to exactly the value.
func TestDecryptPadding(t *testing.T) {
	key := testKey(t)
	for n := 1; n <= aes.BlockSize; n++ {
		plain := strings.Repeat("v", 2*aes.BlockSize-n) // the padding ends the second block
		padded := append([]byte(plain), bytes.Repeat([]byte{byte(n)}, n)...)
		if got, err := studio.Decrypt(key, sealRaw(t, &key.PublicKey, padded)); err != nil || got != plain {
			t.Errorf("padding of %d: %q, %v; want %q", n, got, err, plain)
		}
	}
	block1 := []byte("0123456789abcdef")
	for _, tc := range []struct {
		name  string
		last  []byte // the last block, after block1
		first []byte // block1 when nil
	}{
		{"pad length 17, every byte of it 17", bytes.Repeat([]byte{17}, aes.BlockSize), []byte("0123456789abcde\x11")},
		{"a middle padding byte corrupt", append([]byte("secret-value"), 4, 4, 3, 4), nil},
		{"the first padding byte corrupt", append([]byte("secret-value-"), 2, 3, 3), nil},
		{"a whole block of padding, its first byte corrupt", append([]byte{15}, bytes.Repeat([]byte{16}, 15)...), nil},
		{"pad length 0", append([]byte("secret-value-12"), 0), nil},
		{"pad length over a block", bytes.Repeat([]byte{17}, aes.BlockSize), nil},
	} {
		if len(tc.last) != aes.BlockSize {
			t.Fatalf("%s: the test's block is %d bytes", tc.name, len(tc.last))
		}
		first := block1
		if tc.first != nil {
			first = tc.first
		}
		got, err := studio.Decrypt(key, sealRaw(t, &key.PublicKey, append(append([]byte(nil), first...), tc.last...)))
		if !errors.Is(err, studio.ErrBadPadding) || got != "" {
			t.Errorf("%s: %q, %v; want ErrBadPadding", tc.name, got, err)
		}
		if err != nil && strings.Contains(err.Error(), "secret-value") {
			t.Errorf("%s: the error shows the value", tc.name)
		}
	}
}

// TestDecryptRefusesWhatOpens: a blob that decrypts but is not a value Studio sends (a wrapped
// AES key that is not 32 bytes, a value that is not UTF-8) is refused with its own error.
func TestDecryptRefusesWhatOpens(t *testing.T) {
	key := testKey(t)
	short := make([]byte, 16) // an AES-128 key
	wrapped, err := rsa.EncryptOAEP(sha256.New(), rand.Reader, &key.PublicKey, short, nil)
	if err != nil {
		t.Fatal(err)
	}
	blob := base64.StdEncoding.EncodeToString(append(wrapped, make([]byte, 2*aes.BlockSize)...))
	if got, err := studio.Decrypt(key, blob); !errors.Is(err, studio.ErrWrongKey) || got != "" {
		t.Errorf("a 16-byte AES key: %q, %v; want ErrWrongKey", got, err)
	}
	notUTF8 := append([]byte("secret-value\xff\xfe"), 2, 2)
	if got, err := studio.Decrypt(key, sealRaw(t, &key.PublicKey, notUTF8)); !errors.Is(err, studio.ErrInvalidUTF8) || got != "" {
		t.Errorf("a value that is not UTF-8: %q, %v; want ErrInvalidUTF8", got, err)
	}
	// Surrounding spaces of the base64 text are not part of it.
	if got, err := studio.Decrypt(key, " \n"+sealRaw(t, &key.PublicKey, append([]byte("secret-value-1"), 2, 2))+"\n "); err != nil || got != "secret-value-1" {
		t.Errorf("a blob with surrounding spaces: %q, %v", got, err)
	}
}
