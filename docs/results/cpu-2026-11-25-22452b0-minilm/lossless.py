# Lossless check of ans and beam on MiniLM (docs/MODELS.md). Needs the compressed files of run.sh
# in /tmp/models-run (with its copy of cmv) and writes to /tmp/lossless. Python 3, no packages.
import json, struct
def read(path):
    b = open(path, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    h = json.loads(b[8:8+n]); base = 8 + n
    meta = h.pop('__metadata__', {})
    t = {k: (v['dtype'], v['shape'], b[base+v['data_offsets'][0]:base+v['data_offsets'][1]]) for k, v in h.items()}
    return meta, t
def write(path, tensors, meta=None):
    hdr = {}; off = 0; blobs = []
    for k in sorted(tensors):
        dt, shape, data = tensors[k]
        hdr[k] = {'dtype': dt, 'shape': shape, 'data_offsets': [off, off + len(data)]}
        off += len(data); blobs.append(data)
    if meta: hdr['__metadata__'] = meta
    h = json.dumps(hdr).encode(); h += b' ' * ((8 - len(h) % 8) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h))); f.write(h)
        for d in blobs: f.write(d)
import sys, array, subprocess, hashlib, os
R = '/tmp/models-run'; C = R + '/cmv'; D = '/tmp/lossless'
def sh(*a): subprocess.run(a, check=True, stdout=subprocess.DEVNULL)
cmeta, ct = read(f'{R}/h.ans.rows.-.safetensors')
names = sorted(k[len('cmv.'):] for k in cmeta if k.startswith('cmv.'))
print(len(names), 'compressed tensors')
sh(C, 'decompress', f'{R}/h.ans.rows.-.safetensors', '-o', f'{D}/dec.ans.rows.safetensors', '--force', '--dtype', 'f32')
_, dt = read(f'{D}/dec.ans.rows.safetensors')
i8, u8 = {}, {}
for n in names:
    dtype, shape, data = dt[n]; assert dtype == 'F32'
    x = array.array('f', data)
    sd, sshape, sdata = ct[n + '.cmv_scales']; s = array.array('f', sdata)
    cols = shape[1]; q = array.array('b')
    for r in range(shape[0]):
        sr = s[r]
        for c in range(cols):
            v = x[r*cols+c]; qq = 0 if sr == 0 else round(v / sr)
            assert -127 <= qq <= 127
            # the decoded value is exactly the f32 product q * s
            assert struct.unpack('f', struct.pack('f', qq * sr))[0] == v, (n, r, c)
            q.append(qq)
    i8[n] = ('I8', shape, q.tobytes())
    u8[n] = ('U8', shape, bytes((v + 127) & 0xff for v in q))
write(f'{D}/int8.safetensors', i8); write(f'{D}/uint8.safetensors', u8)
print('int8 model written: every decoded float is q * s exactly')
def sha(p): return hashlib.sha256(open(p, 'rb').read()).hexdigest()[:16]
for f, variants, src in [('ans', ['rows', 'stripes', 'auto'], 'int8'), ('beam', ['naive', 'tight', 'slabs', 'nogaps'], 'uint8')]:
    _, want = read(f'{D}/{src}.safetensors')
    for v in variants:
        # float input: the decompressed file of each variant
        sh(C, 'decompress', f'{R}/h.{f}.{v}.-.safetensors', '-o', f'{D}/dec.{f}.{v}.safetensors', '--force', '--dtype', 'f32')
        print(f'float input {f} {v}: decompressed sha256 {sha(f"{D}/dec.{f}.{v}.safetensors")}')
        o = f'{D}/{src}.{f}.{v}.safetensors'
        sh(C, 'compress', f'{D}/{src}.safetensors', '-f', f, '--variant', v, '-q', '--force', '-o', o)
        sh(C, 'decompress', o, '-o', o + '.dec', '--force')
        _, got = read(o + '.dec')
        same = all(got[n] == want[n] for n in names) and set(got) == set(want)
        print(f'{src} input {f} {v}: {len(names)} tensors byte-identical after decompress: {same}; '
              f'compressed {os.path.getsize(o)} bytes, input {os.path.getsize(f"{D}/{src}.safetensors")}')
