#if Examples  // trait Examples (Package.swift); otherwise Fallback.swift
import Fluent
import SQLCipherKit
import SQLCipherKitFluent
import SQLCipherKitLiveRotation
import Vapor

extension VaporExample {
    /// NOTES_LIVE_ROTATION=bare: live key rotation with Vapor's lifecycle and no swift-service-lifecycle
    /// (Docs/Services.md, "Live key rotation without swift-service-lifecycle"). This file needs the product
    /// `SQLCipherKitLiveRotation` only (trait LiveRotation), which links no swift-service-lifecycle.
    ///
    /// - Returns: What closes the database after Fluent: stops the watch, then closes the pool after the work in
    ///   flight.
    static func useLiveKeyRotation(
        _ app: Application, path: String, keyFile: String
    ) throws -> @Sendable () async -> Void {
        var configuration = LiveKeyRotation.Configuration(metricsName: "notes", logger: app.logger)
        configuration.pool.openOptions.enforcesForeignKeys = true
        let rotation = try LiveKeyRotation(path: path, keyFile: keyFile, configuration: configuration)
        app.databases.use(.sqlcipher(pool: rotation.pool), as: .sqlcipher)
        let watcher = Task { await rotation.run() }
        return {
            watcher.cancel()
            await watcher.value
            rotation.pool.close()
        }
    }
}
#endif
