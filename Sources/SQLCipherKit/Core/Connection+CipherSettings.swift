// Cipher settings applied to a schema on open or attach, each read back.
extension Connection {
    /// Applies each cipher setting to a schema (`main` or an attached database) and reads it back: SQLite ignores
    /// PRAGMAs it does not know.
    func applyCipherSettings(_ settings: CipherSettings, key: EncryptionKey, schema: String) throws {
        // The guard refuses these PRAGMAs in SQL; this is the library's own door (an attached schema's settings).
        try withLibraryStatements { try applyCipherSettingsUnguarded(settings, key: key, schema: schema) }
    }

    private func applyCipherSettingsUnguarded(_ settings: CipherSettings, key: EncryptionKey, schema: String) throws {
        func applyPragma(_ name: String, value: String, expected: String) throws {
            try self.applyPragma("\(schema).\(name)", value: value, expected: expected)
        }
        let isVersion4 = SQLCipher.supports(.version4Format)
        if let violation = settings.rangeViolation {
            throw Self.invalidSetting(violation.message(naming: violation.setting.name))
        }

        var settings = settings
        if let compatibility = settings.compatibility, let implied = CipherSettings.defaults(ofMajorVersion: compatibility) {
            if isVersion4 {
                try SQLCipher.require(.compatibility)
                // cipher_compatibility cannot be read back: check the settings it implies instead.
                try execute("PRAGMA \(schema).cipher_compatibility = \(compatibility)")
                let setting = "compatibility \(compatibility)"
                try checkPragma("\(schema).cipher_page_size", expected: String(implied.pageSize!), setting: setting)
                try checkPragma("\(schema).kdf_iter", expected: String(implied.kdfIterations!), setting: setting)
                try checkPragma("\(schema).cipher_use_hmac", expected: implied.usesHMAC! ? "1" : "0", setting: setting)
                try checkPragma(
                    "\(schema).cipher_hmac_algorithm", expected: implied.hmacAlgorithm!.rawValue, setting: setting)
            } else if compatibility == 4 {
                try SQLCipher.require(.version4Format)
            } else {
                // SQLCipher 3 has no cipher_compatibility: apply the explicit settings it stands for (each read back).
                settings = settings.resolvingCompatibility
            }
        }
        if let pageSize = settings.pageSize {
            try applyPragma("cipher_page_size", value: String(pageSize), expected: String(pageSize))
        }
        if let kdfIterations = settings.kdfIterations {
            try applyPragma("kdf_iter", value: String(kdfIterations), expected: String(kdfIterations))
        }
        if let usesHMAC = settings.usesHMAC {
            try applyPragma("cipher_use_hmac", value: usesHMAC ? "ON" : "OFF", expected: usesHMAC ? "1" : "0")
        }
        if let algorithm = settings.kdfAlgorithm {
            if isVersion4 {
                try applyPragma("cipher_kdf_algorithm", value: algorithm.rawValue, expected: algorithm.rawValue)
            } else if algorithm != .pbkdf2HMACSHA1 {
                try SQLCipher.require(.algorithmSelection)
            }
        }
        if let algorithm = settings.hmacAlgorithm {
            if isVersion4 {
                try applyPragma("cipher_hmac_algorithm", value: algorithm.rawValue, expected: algorithm.rawValue)
            } else if algorithm != .hmacSHA1 {
                try SQLCipher.require(.algorithmSelection)
            }
        }
        if let size = settings.plaintextHeaderSize {
            try SQLCipher.require(.plaintextHeader)
            try applyPragma("cipher_plaintext_header_size", value: String(size), expected: String(size))
            if size > 0 && settings.salt == nil && key.salt == nil && schema == "main"
                && regularFileSize(atPath: filePath) ?? 0 > 0 {
                throw DatabaseError(
                    .invalidKey, "a database with a plaintext header does not store its salt", remedy: .giveSalt)
            }
        }
        if let salt = settings.salt {
            try SQLCipher.require(.plaintextHeader)
            // The salt is not secret; it is stored in every normal SQLCipher file's first 16 bytes.
            let hex = Hex.string(salt)
            try execute("PRAGMA \(schema).cipher_salt = \"x'\(hex)'\"")
        }
        // The three settings below are deprecated since SQLCipher 4.1 (setting them returns a notice row) but are
        // still needed for SQLCipher 2.0 files; each is read back.
        if let encoding = settings.hmacPageNumberEncoding {
            try applyPragma("cipher_hmac_pgno", value: encoding.rawValue, expected: encoding.rawValue)
        }
        if let iterations = settings.fastKDFIterations {
            try applyPragma("fast_kdf_iter", value: String(iterations), expected: String(iterations))
        }
        if let mask = settings.hmacSaltMask {
            // Process-wide in both engines: only the scope of SQLCipher.withHMACSaltMask may change it.
            try HMACSaltMaskScope.checkAllowed(mask)
            let hex = Hex.string([mask])
            try self.applyPragma("cipher_hmac_salt_mask", value: "\"x'\(hex)'\"", expected: hex)
        }
    }

    private func applyPragma(_ name: String, value: String, expected: String) throws {
        try execute("PRAGMA \(name) = \(value)")
        try checkPragma(name, expected: expected, setting: "PRAGMA \(name) = \(value)")
    }

    private func checkPragma(_ name: String, expected: String, setting: String) throws {
        let actual = try pragmaText(name)
        guard actual?.caseInsensitiveEquals(expected) == true else {
            throw DatabaseError(
                .unsupportedByEngine,
                "SQLCipher \(SQLCipher.version) did not apply \(setting) (\(name) reads back "
                    + "\(actual.map { "`\($0)`" } ?? "nothing")); refusing to open with other settings than asked")
        }
    }

    static func invalidSetting(_ message: String) -> DatabaseError {
        DatabaseError(.invalidArgument, message)
    }
}
