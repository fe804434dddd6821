"""What the tests share: paths, a simulated Kubernetes cluster, the operator config schemas, crafted
results, small lattices, the contexts a kernel runs in."""
