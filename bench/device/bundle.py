# A self-contained x86-64 runtime for weft's CPU build and Debian's Open MPI: binaries, Open MPI and
# PMIx plugins and help files, every shared library they need (glibc excepted), libtorch's unused
# opencv/ffmpeg dependencies replaced by stubs.
import subprocess, re, os, shutil, sys, glob
rt = sys.argv[1]; build = sys.argv[2]; stubdir = sys.argv[3]
stub = re.compile(r'^lib(opencv_|avcodec|avformat|avutil|swscale|swresample)')
skip_plugin = re.compile(r'libucp|libucs|libuct|libfabric|libibverbs|libpsm|librdmacm|libcuda|libnvidia|libpmi\.so|libpmi2|libslurm')
glibc = {'libc.so.6','libm.so.6','libpthread.so.0','libdl.so.2','librt.so.1','ld-linux-x86-64.so.2','libresolv.so.2','libutil.so.1','libanl.so.1'}
def needed(p): return re.findall(r'NEEDED\s+(\S+)', subprocess.run(['objdump','-p',p],capture_output=True,text=True).stdout)
cache = subprocess.run(['ldconfig','-p'],capture_output=True,text=True).stdout
def find(n):
    m = re.search(r'\s'+re.escape(n)+r' \(libc6,x86-64[^)]*\) => (\S+)', cache)
    if m: return os.path.realpath(m.group(1))
    for d in ['/usr/lib/x86_64-linux-gnu','/usr/lib','/usr/lib/x86_64-linux-gnu/openmpi/lib']:
        if os.path.exists(f'{d}/{n}'): return os.path.realpath(f'{d}/{n}')
    return None
shutil.rmtree(rt, ignore_errors=True)
os.makedirs(f'{rt}/lib'); os.makedirs(f'{rt}/bin'); os.makedirs(f'{rt}/usr/bin')
elves = []
for b in ['weft','weft-nn']:
    shutil.copy(f'{build}/apps/weft/{b}', f'{rt}/bin/{b}'); elves.append(f'{rt}/bin/{b}')
for b in ['orterun','orted']:
    shutil.copy(f'/usr/bin/{b}', f'{rt}/usr/bin/{b}'); elves.append(f'{rt}/usr/bin/{b}')
os.symlink('orterun', f'{rt}/usr/bin/mpirun')
for src, dst in [('/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3', 'usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3'),
                 ('/usr/lib/x86_64-linux-gnu/pmix2/lib', 'usr/lib/x86_64-linux-gnu/pmix2/lib')]:
    os.makedirs(f'{rt}/{dst}', exist_ok=True)
    for p in glob.glob(f'{src}/**/*.so', recursive=True):
        if os.path.islink(p) and not p.endswith('.so'): continue
        if skip_plugin.search(' '.join(needed(p))): continue
        q = f'{rt}/{dst}/{os.path.relpath(p, src)}'; os.makedirs(os.path.dirname(q), exist_ok=True)
        shutil.copy(os.path.realpath(p), q); elves.append(q)
for src, dst in [('/usr/share/openmpi','usr/share/openmpi'), ('/usr/lib/x86_64-linux-gnu/pmix2/share','usr/lib/x86_64-linux-gnu/pmix2/share')]:
    shutil.copytree(src, f'{rt}/{dst}', symlinks=False, ignore=shutil.ignore_patterns('*wrapper-data*'))
seen = set(); todo = list(elves)
while todo:
    for n in needed(todo.pop()):
        if n in glibc or n in seen: continue
        seen.add(n)
        if stub.match(n):
            shutil.copy(f'{stubdir}/{n}', f'{rt}/lib/{n}'); continue
        f = find(n)
        if not f: print('MISSING', n); continue
        shutil.copy(f, f'{rt}/lib/{n}'); todo.append(f)
print(len(seen), 'libraries')
