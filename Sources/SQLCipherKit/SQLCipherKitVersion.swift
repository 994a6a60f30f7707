/// The version of the SQLCipherKit library.
public enum SQLCipherKitVersion {
    /// The version string, `major.minor.patch`.
    public static let string = "0.1.0"
}
