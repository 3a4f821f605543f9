# Regenerates canonical.json: what the reference hashes for each input (Python's
# json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))). Run: python3 canonical.py
import hashlib, json

inputs = [
    '{}',
    '{"state":"proposed"}',
    '{"b":1,"a":2,"C":3,"_":4,"é":5,"z":{"y":1,"x":[3,2,1]}}',
    '{"html":"<a href=\\"x\\">&amp;</a>","slash":"a/b","quote":"\\"","backslash":"\\\\"}',
    '{"ctl":"\\u0000\\u0001\\b\\f\\n\\r\\t\\u001f\\u007f","ls":"\\u2028\\u2029"}',
    '{"utf8":"café – 日本 😀","astral":"\\ud83d\\ude00","replacement":"\\ufffd"}',
    '{"ints":[0,-0,1,-1,9007199254740993,123456789012345678901234567890]}',
    '{"floats":[1.0,-0.0,0.5,1e16,1e15,1.5e16,0.0001,0.00001,1e-7,123.456,1E2,2.5e-3,1e400,-1e400,3.141592653589793,0.1,100.0,1e22,1.7976931348623157e308,5e-324]}',
    '{"exponents":[1e-10,1.5e-10,1e-9,2.5e-11,1e-100,1e100,1e-5,1.5e-5,1e-4,1e16,1e17,1e-300]}',
    '{"bools":[true,false,null],"nested":{"list":[{"b":2,"a":1},[],{}]}}',
    '{"dup":1,"dup":2}',
    '{"keys":{"b":1,"a":1,"aa":1,"A":1,"\\u00e9":1,"\\ud83d\\ude00":1,"\\uffff":1}}',
]
cases = []
for text in inputs:
    out = json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
    cases.append({"in": text, "out": out, "sha256": hashlib.sha256(out.encode()).hexdigest()})
with open("canonical.json", "w") as f:
    json.dump(cases, f, indent=1)
    f.write("\n")
