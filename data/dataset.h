// data: dataset readers (IDX/MNIST, CIFAR-10 binary, synthetic), per-worker sharding,
// shuffling, batching and input pipelines. This is the umbrella header: include it to get
// the whole module.
// Thread-safety: see each header; loaders are reentrant, a Batcher belongs to one thread.
#pragma once

#include "data/batcher.h"        // IWYU pragma: export
#include "data/cifar10.h"        // IWYU pragma: export
#include "data/dataset_types.h"  // IWYU pragma: export
#include "data/load.h"           // IWYU pragma: export
#include "data/mnist.h"          // IWYU pragma: export
#include "data/pipeline.h"       // IWYU pragma: export
#include "data/synthetic.h"      // IWYU pragma: export
