// `LiveKeyRotation` is a module of its own (SQLCipherKitLiveRotation, which links no swift-service-lifecycle);
// `import SQLCipherKitServices` still brings it, as it did when it lived here.
@_exported import SQLCipherKitLiveRotation
