# Stub shared library with the same soname, symbols and versions as a real one; every function
# aborts. Used to cut libtorch's unused opencv/ffmpeg dependency subtrees out of a carried bundle.
import subprocess, sys, os, re
real, outdir = sys.argv[1], sys.argv[2]
soname = re.search(r'SONAME\s+(\S+)', subprocess.run(['objdump','-p',real],capture_output=True,text=True).stdout).group(1)
out = subprocess.run(['nm','-D','-S','--defined-only','--with-symbol-versions',real],capture_output=True,text=True).stdout
syms = {}
for line in out.splitlines():
    parts = line.split()
    if len(parts) == 4: addr, size, typ, name = parts
    elif len(parts) == 3: addr, typ, name = parts; size = '0'
    else: continue
    ver = None
    if '@@' in name: name, ver = name.split('@@')
    elif '@' in name:
        n, v = name.split('@')
        if n in syms: continue
        name, ver = n, v
    if typ in 'A': continue
    syms[name] = (typ, int(size, 16), ver)
asm = ['.text']
vers = {}
for i, (name, (typ, size, ver)) in enumerate(sorted(syms.items())):
    if ver: vers.setdefault(ver, []).append(name)
    if typ in 'TtWiI':
        asm += [f'.globl {name}', f'.type {name}, @function', f'{name}:', 'ud2']
    else:
        asm += ['.data', '.balign 16', f'.globl {name}', f'.type {name}, @object', f'.size {name}, {max(size,1)}', f'{name}:', f'.zero {max(size,1)}', '.text']
open(f'{outdir}/{soname}.s','w').write('\n'.join(asm)+'\n')
cmd = ['gcc','-shared','-nostdlib','-o',f'{outdir}/{soname}',f'{outdir}/{soname}.s','-Wl,-soname,'+soname]
if vers:
    vmap = ''.join(f'{v} {{ global: {"; ".join(n)}; }};\n' for v, n in vers.items())
    if None in vers: pass
    open(f'{outdir}/{soname}.map','w').write(vmap + 'LOCAL_STUB { local: *; };\n')
    cmd.append(f'-Wl,--version-script={outdir}/{soname}.map')
subprocess.run(cmd, check=True)
os.remove(f'{outdir}/{soname}.s')
print(soname, len(syms), 'symbols', len(vers), 'versions')
