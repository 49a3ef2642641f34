//! Without the `probe` feature per-node attribution compiles to nothing: the node scope
//! and id are zero-sized, the scope has no `Drop`, no node is ever registered.
#![cfg(not(feature = "probe"))]

use rivet_ep::probe::{self, NodeId, NodeScope};

#[test]
fn the_node_scope_is_zero_sized_and_has_no_drop() {
    assert_eq!(std::mem::size_of::<NodeScope>(), 0);
    assert!(!std::mem::needs_drop::<NodeScope>());
    assert_eq!(std::mem::size_of::<NodeId>(), 0);
    let id = probe::register_node("fused", "conv1 (+relu1)", "Conv");
    drop(NodeScope::enter(id));
    assert_eq!(probe::node_count(), 0);
    assert!(probe::node_stats(0).is_none());
}
