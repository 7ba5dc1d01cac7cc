# ResNet-50 B64 224^2 bf16 autocast: eager fwd+bwd, NCHW vs channels_last;
# profiler sums of conv kernels vs everything else.
import sys, torch, importlib.util, statistics
sys.path.insert(0, "bench/models")
import torch_models as tm
from torch.profiler import profile, ProfilerActivity
torch.backends.cudnn.benchmark = True
def run(cl):
    torch.manual_seed(0)
    m = tm.ResNet(tm.Bottleneck, [3,4,6,3], 1000, cifar=False).cuda()
    x = torch.randn(64,3,224,224, device="cuda"); y = torch.randint(0,1000,(64,),device="cuda")
    if cl: m = m.to(memory_format=torch.channels_last); x = x.to(memory_format=torch.channels_last)
    def step():
        with torch.autocast("cuda", torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(m(x), y)
        loss.backward()
    for _ in range(5): step()
    torch.cuda.synchronize()
    ts=[]
    for _ in range(10):
        a=torch.cuda.Event(enable_timing=True); b=torch.cuda.Event(enable_timing=True)
        a.record(); step(); b.record(); torch.cuda.synchronize(); ts.append(a.elapsed_time(b))
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(3): step()
        torch.cuda.synchronize()
    conv=other=0.0; names={}
    for e in p.key_averages():
        t = e.device_time_total/3/1000 if hasattr(e,'device_time_total') else e.cuda_time_total/3/1000
        if e.device_type.name != 'CUDA': continue
        n=e.key.lower()
        if any(k in n for k in ("conv","cudnn","implicit","xmma","sm90","wgrad","dgrad","fprop","nhwc","nchw","cutlass")): conv+=t; names[e.key]=t
        else: other+=t
    top=sorted(names.items(), key=lambda kv:-kv[1])[:6]
    print(f"{'NHWC' if cl else 'NCHW'}: step {statistics.median(ts):.2f} ms  conv-ish kernels {conv:.2f} ms  other {other:.2f} ms")
    for k,v in top: print(f"   {v:7.3f} {k[:110]}")
run(False); run(True)
