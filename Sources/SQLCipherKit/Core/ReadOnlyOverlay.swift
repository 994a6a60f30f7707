import CSQLCipherKitSupport

/// The read-only overlay VFS of one connection (Sources/CSQLCipherKitSupport/OverlayVFS.c): SQLite reads the files
/// on disk, and what it would write (a hot journal's rollback, a journal's deletion, the WAL index) stays in this
/// process's memory. Nothing is created, written or deleted on disk; the database gets a real SHARED lock only.
///
/// Destroy it after the connection that used it closed (``ReadOnlyCheck`` does both).
final class ReadOnlyOverlay {
    private let overlay: OpaquePointer

    /// The VFS name to open the connection with (registered for this overlay alone, never as the default).
    let vfsName: String

    init() throws {
        guard let overlay = CSQLCipherKitSupport_overlayCreate() else {
            throw DatabaseError(
                kind: .sqlite, code: DatabaseError.SQLITE_NOMEM,
                message: "cannot create the read-only overlay for a check: out of memory")
        }
        self.overlay = overlay
        vfsName = String(cString: CSQLCipherKitSupport_overlayName(overlay))
    }

    /// Whether SQLite finished with a rollback journal through the overlay: it rolled a hot journal back (in memory)
    /// and deleted it (in memory), as it will do on disk at the next read-write open.
    var finishedJournal: Bool {
        CSQLCipherKitSupport_overlayFinishedJournal(overlay) != 0
    }

    /// The most bytes of written pages the overlay held at once (about the size of the pages a rollback restored).
    var memoryHighWater: Int {
        Int(CSQLCipherKitSupport_overlayMemoryHighWater(overlay))
    }

    /// Unregisters the VFS and frees its memory. The connection must be closed.
    func destroy() {
        // -1: a file is still open (a connection not closed): the overlay is left allocated rather than freed.
        _ = CSQLCipherKitSupport_overlayDestroy(overlay)
    }
}
