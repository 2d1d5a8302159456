#!/usr/bin/env python3
# Index model of the D256 path: prep record of global chunk gc (SeqTable::chunk / at) vs the record the
# state kernel computes for (work item, m) (plan_segments items, chunk0 = chunk_off + (row_begin - seq row_begin)/64).
import random
kC=64
def seqtable(lengths):
    rows=0; off=0; t=[]
    for L in lengths:
        t.append((rows,L,off)); rows+=L; off+=(L+63)//64
    return t, off
def chunk(t, gc):
    lo,hi=0,len(t)-1
    while lo<hi:
        mid=(lo+hi+1)>>1
        if t[mid][2]<=gc: lo=mid
        else: hi=mid-1
    return lo, gc-t[lo][2]
def plan(lengths, seg):
    items=[]; slots=0
    for n,L in enumerate(lengths):
        nch=(L+63)//64; ns=max(1,min(seg,nch//2))
        rb=sum(lengths[:n])
        for u in range(ns):
            c0=u*nch//ns; c1=(u+1)*nch//ns
            t0=c0*kC; t1=min(L,c1*kC)
            items.append((rb+t0,t1-t0,n,u,ns,slots))
        slots+=ns-1
    return items
for trial in range(3000):
    N=random.randint(1,6)
    lengths=[random.choice([0,1,63,64,65,random.randint(0,700)]) for _ in range(N)]
    t,total=seqtable(lengths)
    prep={}
    for gc in range(total):
        s,c=chunk(t,gc)
        rb,L,off=t[s]
        t0=c*kC; cn=min(kC,L-t0)
        assert cn>0, (lengths,gc)
        prep[gc]=(rb+t0,cn)
    covered=set()
    for seg in [1,2,5,16]:
        for (row_begin,length,n,u,ns,slot0) in plan(lengths,seg):
            rb,L,off=t[n]
            chunk0=off+(row_begin-rb)//kC
            assert (row_begin-rb)%kC==0
            for m in range((length+63)//64):
                row0=row_begin+m*kC; cn=min(kC,length-m*kC)
                assert prep[chunk0+m]==(row0,cn),(lengths,seg,n,u,m)
                if seg==1: covered.add(chunk0+m)
    assert covered==set(range(total))
print("index model ok")
