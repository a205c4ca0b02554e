// Prototype (CUDA C, not part of the build): VQ<4,8,1> GEMV at batch 1 with 512 x 128 tiles,
// "lane = position" table kernel. Per unit (one tile: 512 rows x 32 positions) the block builds
// T[e][p] = dot(codebook entry e, x[4p..4p+4]) in shared memory (fp32, entry stride 256 bytes,
// two tables interleaved), lane l of every warp looks up position l of RPW rows (conflict-free:
// bank = lane), codes and codebooks stream through a TMA (cp.async.bulk) ring of NSLOT units.
// Build: nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -DRPW=32 vq_lut_proto.cu
// Run:   ./a.out 28672 8192   (rows cols; multiples of 512 and 128)
// Results on an H200 (2026-11-28): docs/PERF.md "VQ: a table kernel with a lane per position
// (CUDA prototype, not built)".
#include <cuda_fp16.h>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>
#include <algorithm>
#define CK(x) do{cudaError_t e=(x); if(e!=cudaSuccess){printf("err %s line %d\n",cudaGetErrorString(e),__LINE__);exit(1);}}while(0)
#ifndef RPW
#define RPW 32
#endif
#ifndef NSLOT
#define NSLOT 8
#endif
#define H (RPW/16)
#define WARPS (512/RPW)
#define THREADS (WARPS*32)
#define EPW (256/WARPS)
#define SLOT_BYTES (16384+2048+256)
#define CBS_OFF 65536
#define XS_OFF (65536+8192)
#define RING_OFF (65536+8192+1024)
#define BAR_OFF (RING_OFF + NSLOT*SLOT_BYTES)
#define SMEM (BAR_OFF + 8*NSLOT)

struct P { const uint4* codes; const uint2* cb; const __half* x; float* y; int rows, cols, rbs, slabs, units; };
__device__ __forceinline__ float4 cvt4(uint2 w){ float2 a=__half22float2(*(__half2*)&w.x), b=__half22float2(*(__half2*)&w.y); return make_float4(a.x,a.y,b.x,b.y);}
__device__ __forceinline__ unsigned saddr(const void* p){ return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count){ asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count)); }
__device__ __forceinline__ void mbar_expect(unsigned bar, unsigned bytes){ asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory"); }
__device__ __forceinline__ void bulk(unsigned dst, const void* src, unsigned bytes, unsigned bar){ asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" :: "r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory"); }
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned ph){ asm volatile("{\n .reg .pred p;\n W%=: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra W%=;\n}" :: "r"(bar), "r"(ph) : "memory"); }
__device__ __forceinline__ float lds(unsigned a){ float v; asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(a)); return v; }

__global__ void __launch_bounds__(THREADS,1) vqpos(P p){
  extern __shared__ __align__(128) unsigned char sm[];
  const int tid=threadIdx.x, lane=tid&31, warp=tid>>5;
  const int start=(long long)blockIdx.x*p.units/gridDim.x, end=(long long)(blockIdx.x+1)*p.units/gridDim.x;
  if(start>=end) return;
  const unsigned base=saddr(sm), bar0=base+BAR_OFF;
  int islab=start%p.slabs; const bool issuer=(tid==THREADS-32);
  auto issue=[&](int u){ int j=u-start; int k=j%NSLOT; unsigned bar=bar0+8*k; unsigned dst=base+RING_OFF+k*SLOT_BYTES; int slab=islab; if(++islab==p.slabs) islab=0;
     mbar_expect(bar, SLOT_BYTES); bulk(dst, p.codes+(size_t)u*1024, 16384, bar); bulk(dst+16384, p.cb+(size_t)u*256, 2048, bar); bulk(dst+18432, p.x+slab*128, 256, bar); };
  auto wait=[&](int j){ mbar_wait(bar0+8*(j%NSLOT), (j/NSLOT)&1); };
  auto convert=[&](int j){ if(start+j<end && tid<288){ wait(j); const unsigned char* sl=sm+RING_OFF+(j%NSLOT)*SLOT_BYTES; int s=j&1;
      if(tid<256){ uint2 r=((const uint2*)(sl+16384))[tid]; ((float4*)(sm+CBS_OFF))[s*256+tid]=cvt4(r);} else { uint2 r=((const uint2*)(sl+18432))[tid-256]; ((float4*)(sm+XS_OFF))[s*32+tid-256]=cvt4(r);} } };
  auto build=[&](int s){ // table s from stage s; all entry loads before any store (no aliasing stall)
      const float4* cbs=(const float4*)(sm+CBS_OFF) + s*256; float4 xv=((const float4*)(sm+XS_OFF))[s*32+lane];
      float* T=(float*)(sm + s*128);
      float4 c[EPW];
      #pragma unroll
      for(int i=0;i<EPW;i++) c[i]=cbs[warp*EPW+i];
      #pragma unroll
      for(int i=0;i<EPW;i++){ int e=warp*EPW+i; T[e*64+lane]= c[i].x*xv.x+c[i].y*xv.y+c[i].z*xv.z+c[i].w*xv.w; } };
  if(tid==0){ for(int k=0;k<NSLOT;k++) mbar_init(bar0+8*k,1); asm volatile("fence.mbarrier_init.release.cluster;"); }
  __syncthreads();
  if(issuer){ for(int u=start; u<start+NSLOT-1 && u<end; u++) issue(u); }
  float acc[RPW];
  #pragma unroll
  for(int j=0;j<RPW;j++) acc[j]=0.f;
  convert(0); convert(1);
  __syncthreads();
  build(0);
  __syncthreads();
  int rb=start/p.slabs, slab=start%p.slabs;
  const unsigned lw0=lane*4, lw1=lane*4+128;
  for(int j=0;;){
    #pragma unroll
    for(int b=0;b<2;b++){
      const int u=start+j;
      if(issuer && u+NSLOT-1<end) issue(u+NSLOT-1);
      convert(j+2);
      if(u+1<end) build(b^1);
      wait(j);
      const uint4* q=(const uint4*)(sm+RING_OFF+(j%NSLOT)*SLOT_BYTES) + warp*H*32;
      const unsigned lw = b ? lw1 : lw0;
      #pragma unroll
      for(int h=0;h<H;h++){
        uint4 c=q[h*32+lane]; unsigned w[4]={c.x,c.y,c.z,c.w};
        #pragma unroll
        for(int jj=0;jj<4;jj++){
          #pragma unroll
          for(int k=0;k<4;k++) acc[h*16+jj*4+k] += lds(base + __byte_perm(w[jj], lw, 0x5504 | (k<<4)));
        }
      }
      if(++slab==p.slabs || u+1==end){
        #pragma unroll
        for(int off=RPW/2; off>=1; off>>=1){
          bool up = lane & off;
          #pragma unroll
          for(int i=0;i<RPW/2;i++){ if(i<off){ float send = up? acc[i]: acc[i+off]; float keep = up? acc[i+off]: acc[i]; acc[i]= keep + __shfl_xor_sync(0xffffffff, send, off);} }
        }
        if(RPW==16) acc[0]+=__shfl_xor_sync(0xffffffff, acc[0], 16);
        int row = rb*512 + warp*RPW + (lane%RPW);
        if(row < p.rows && lane<RPW) atomicAdd(p.y+row, acc[0]);
        #pragma unroll
        for(int i=0;i<RPW;i++) acc[i]=0.f;
        slab=0; rb++;
      }
      __syncthreads();
      if(++j>=end-start) return;
    }
  }
}

__global__ void readk(const uint4* a, size_t n, const uint4* b, size_t m, unsigned* out){
  unsigned s=0; size_t i=blockIdx.x*(size_t)blockDim.x+threadIdx.x, st=(size_t)gridDim.x*blockDim.x;
  for(size_t k=i;k<n;k+=st){uint4 v=__ldcs(a+k); s^=v.x^v.y^v.z^v.w;}
  for(size_t k=i;k<m;k+=st){uint4 v=__ldcs(b+k); s^=v.x^v.y^v.z^v.w;}
  if(s==0x12345678) out[0]=s;
}
__global__ void refk(const unsigned char* lc, const __half* cb, const __half* x, double* y, int rows, int cols){
  int r=blockIdx.x*blockDim.x+threadIdx.x; if(r>=rows) return; int nv=cols/4, slabs=cols/128; double s=0;
  for(int v=0;v<nv;v++){ int tile=(r/512)*slabs + v/32; int e=lc[(size_t)r*nv+v]; for(int j=0;j<4;j++) s+=(double)__half2float(cb[((size_t)tile*256+e)*4+j])*(double)__half2float(x[v*4+j]); }
  y[r]=s;
}
int main(int argc,char**argv){
  int rows=atoi(argv[1]), cols=atoi(argv[2]);
  int rbs=rows/512, slabs=cols/128, units=rbs*slabs, nv=cols/4;
  size_t codeBytes=(size_t)rows*nv, cbHalves=(size_t)units*256*4;
  std::vector<unsigned char> lc(codeBytes), pos(codeBytes); std::vector<__half> cb(cbHalves), x(cols);
  uint64_t s=12345; auto rnd=[&](){ s^=s<<13; s^=s>>7; s^=s<<17; return s; };
  for(auto& v:lc) v=(unsigned char)(rnd()>>20);
  for(auto& v:cb) v=__float2half(((rnd()>>11)*(1.0/9007199254740992.0))*2-1);
  for(auto& v:x) v=__float2half(((rnd()>>11)*(1.0/9007199254740992.0))*2-1);
  for(int rb=0;rb<rbs;rb++) for(int sl=0;sl<slabs;sl++) for(int w=0;w<WARPS;w++) for(int h=0;h<H;h++) for(int l=0;l<32;l++) for(int k=0;k<16;k++){
    size_t at=(size_t)(rb*slabs+sl)*16384 + (w*H+h)*512 + l*16 + k; int row=rb*512+w*RPW+h*16+k; pos[at]=lc[(size_t)row*nv + sl*32 + l]; }
  int copies = std::max(2, (int)(450e6/(codeBytes+cbHalves*2)));
  unsigned char *dl; __half *dcb0,*dx; unsigned char* dpos; double* dref; float* dy; unsigned* dout;
  CK(cudaMalloc(&dl,codeBytes)); CK(cudaMalloc(&dpos,codeBytes*copies)); CK(cudaMalloc(&dcb0,cbHalves*2*copies)); CK(cudaMalloc(&dx,cols*2)); CK(cudaMalloc(&dref,rows*8)); CK(cudaMalloc(&dy,rows*4)); CK(cudaMalloc(&dout,4));
  CK(cudaMemcpy(dl,lc.data(),codeBytes,cudaMemcpyHostToDevice)); CK(cudaMemcpy(dx,x.data(),cols*2,cudaMemcpyHostToDevice));
  for(int c=0;c<copies;c++){ CK(cudaMemcpy(dpos+c*codeBytes,pos.data(),codeBytes,cudaMemcpyHostToDevice)); CK(cudaMemcpy(dcb0+c*cbHalves,cb.data(),cbHalves*2,cudaMemcpyHostToDevice)); }
  refk<<<(rows+255)/256,256>>>(dl,dcb0,dx,dref,rows,cols); CK(cudaDeviceSynchronize());
  int smem=SMEM;
  CK(cudaFuncSetAttribute(vqpos, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  cudaDeviceProp pr; cudaGetDeviceProperties(&pr,0);
  int grid=pr.multiProcessorCount; if(argc>3) grid=atoi(argv[3]);
  auto mk=[&](int c){ P p{(const uint4*)(dpos+c*codeBytes),(const uint2*)(dcb0+c*cbHalves),dx,dy,rows,cols,rbs,slabs,units}; return p; };
  CK(cudaMemset(dy,0,rows*4)); vqpos<<<grid,THREADS,smem>>>(mk(0)); CK(cudaDeviceSynchronize());
  std::vector<float> y(rows); std::vector<double> ref(rows); CK(cudaMemcpy(y.data(),dy,rows*4,cudaMemcpyDeviceToHost)); CK(cudaMemcpy(ref.data(),dref,rows*8,cudaMemcpyDeviceToHost));
  double num=0,den=0; for(int i=0;i<rows;i++){num+=(y[i]-ref[i])*(y[i]-ref[i]); den+=ref[i]*ref[i];}
  cudaEvent_t a,b; cudaEventCreate(&a); cudaEventCreate(&b);
  auto timeit=[&](auto f){ for(int i=0;i<20;i++) f(i); std::vector<float> t; for(int r=0;r<15;r++){ cudaEventRecord(a); for(int i=0;i<20;i++) f(i); cudaEventRecord(b); cudaEventSynchronize(b); float ms; cudaEventElapsedTime(&ms,a,b); t.push_back(ms*1000/20);} std::sort(t.begin(),t.end()); return t[t.size()/2]; };
  float tk=timeit([&](int i){ vqpos<<<grid,THREADS,smem>>>(mk(i%copies)); });
  float tr=timeit([&](int i){ int c=i%copies; readk<<<pr.multiProcessorCount*4,512>>>((const uint4*)(dpos+c*codeBytes),codeBytes/16,(const uint4*)(dcb0+c*cbHalves),cbHalves*2/16,dout); });
  CK(cudaGetLastError());
  double bytes=codeBytes+cbHalves*2.0+cols*2;
  printf("%dx%d RPW %d grid %d rel_err %.2e  vqpos %.2f us (%.0f GB/s, %.1f%% of 4615)  plain read %.2f us\n", rows, cols, RPW, grid, sqrt(num/den), tk, bytes/tk/1e3, bytes/tk/1e3/46.15, tr);
}
