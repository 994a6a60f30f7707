// What the example and benchmark programs run when the package trait they need is off (the default): instead of an
// empty program, one that says how to build the real one.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes how to build `program` with `trait` on to standard error and exits with status 64 (a usage error).
public func exitBecauseTraitIsOff(program: String, trait: String) -> Never {
    let message = """
        \(program) is built only with the package trait \(trait), which is off by default:
            swift run --traits \(trait) \(program) …
        (or --enable-all-traits; see Docs/Services.md)

        """
    _ = message.withCString { write(STDERR_FILENO, $0, strlen($0)) }
    exit(64)
}
