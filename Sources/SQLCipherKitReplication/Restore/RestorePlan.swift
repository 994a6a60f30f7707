#if Replication  // trait Replication (Package.swift)
/// What a restore downloads: a generation's snapshot, then its segments up to the restore point (chosen and checked
/// by ``ReplicaCatalog``).
struct RestorePlan: Sendable {
    let generation: ReplicaGeneration
    let snapshot: ReplicaSnapshot
    let segments: [ReplicaSegment]
    let point: RestorePoint
}
#endif
