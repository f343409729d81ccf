# A small training loop for scripts/gpu-check.sh: prints the time per step and the final loss,
# which must not depend on the allocator.
import sys, time
from gpu_env import first_device_call, need

torch = need("torch", "torch")
first_device_call("torch.cuda.init()", torch.cuda.init)
torch.manual_seed(0)
dev = "cuda"
model = torch.nn.Sequential(
    torch.nn.Linear(1024, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 10)
).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(256, 1024, device=dev)
y = torch.randint(0, 10, (256,), device=dev)
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 300
for warm in range(10):
    opt.zero_grad(); torch.nn.functional.cross_entropy(model(x), y).backward(); opt.step()
torch.cuda.synchronize()
t = time.perf_counter()
for step in range(steps):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
torch.cuda.synchronize()
print("RESULT torch_step %.1f us" % ((time.perf_counter() - t) / steps * 1e6))
print("RESULT torch_loss %.6f loss" % loss.item())
