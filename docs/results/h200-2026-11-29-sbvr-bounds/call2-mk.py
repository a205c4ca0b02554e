import re,sys
src,dst,n,names=sys.argv[1],sys.argv[2],sys.argv[3],sys.argv[4].split(',')
s=open(src).read()
for nm in names:
    pat="// @%s\n.maxntid 256, 1, 1\n"%nm
    assert s.count(pat)==1,(nm,s.count(pat))
    s=s.replace(pat,pat+".minnctapersm %s\n"%n)
open(dst,'w').write(s)
