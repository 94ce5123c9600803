//! `branching` will own NN-Stretch's transformation: meeting points at stage
//! boundaries, duplicating a stage per processor and scaling each branch in
//! depth and width, the constrained candidate search (paper Eq. 4-6), versioned
//! JSON plans and the branched, annotated graph.
//!
//! It builds on [`graph_ir`] (stage analysis, patches); nothing is implemented here yet.
