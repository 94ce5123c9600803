//! `training` will own lowering a [`graph_ir::Graph`] to a burn module, the
//! datasets (digits, CIFAR-10, MNIST, image folders), the training loop with
//! checkpoints and distillation, and writing trained weights back into the graph.
//!
//! Nothing is implemented here yet.
